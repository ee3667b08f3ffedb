/** CRC-32 as zlib and java.util.zip.CRC32 compute it (reflected, polynomial 0xEDB88320),
 * which is what RMQ.ROUTE uses to pick a topic's slot. Node's zlib.crc32 exists only from
 * Node 22, so the table is built here. */

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32(data: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
