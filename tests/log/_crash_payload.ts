// The payload the crash test writes at each offset: reproducible from the offset alone.
export function crashPayload(offset: number): Uint8Array {
  const size = (offset * 7919) % 700;
  return new TextEncoder().encode(`{"o":${offset},"p":"${"ab".repeat(size >> 1)}"}`);
}
