// The entry the Chromium test bundles for the browser: the zstd-stream
// decoder of the client, put on globalThis for the page to call.
import { ZstdStreamDecoder } from "../../../client/_zstd_stream.ts";

(globalThis as { ZstdStreamDecoder?: typeof ZstdStreamDecoder }).ZstdStreamDecoder =
  ZstdStreamDecoder;
