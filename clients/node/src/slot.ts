/** The Redis Cluster hash slot of a key: CRC16 (XMODEM) of the key, or of its hash tag
 * (the part between the first `{` and the next `}`, when not empty), mod 16384. */

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[n] = c;
  }
  return t;
})();

export function keySlot(key: Buffer): number {
  const open = key.indexOf(0x7b);
  if (open >= 0) {
    const close = key.indexOf(0x7d, open + 1);
    if (close > open + 1) key = key.subarray(open + 1, close);
  }
  let c = 0;
  for (let i = 0; i < key.length; i++) c = ((c << 8) & 0xffff) ^ TABLE[((c >> 8) ^ key[i]) & 0xff];
  return c & 0x3fff;
}
