// The command lines a benchmark's child process reads on stdin ("mark",
// "stop", ...), one at a time, trimmed; the loop ends with stdin.

/** Each line of stdin, trimmed, as it arrives. */
export async function* stdinLines(): AsyncGenerator<string> {
  let buf = "";
  for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let k: number;
    while ((k = buf.indexOf("\n")) !== -1) {
      const line = buf.slice(0, k).trim();
      buf = buf.slice(k + 1);
      yield line;
    }
  }
}
