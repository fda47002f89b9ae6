// Runs `cmdDemo` as its own process, the way `cli.ts demo` will once it is
// wired: `deno run -A tests/harness/demo_main.ts [demo flags]`.
import { cmdDemo } from "../../cli/demo.ts";

Deno.exit(await cmdDemo(Deno.args));
