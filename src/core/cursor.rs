//! RMQ.QUEUES cursors: a listing's position (the last name visited, which the caller may
//! not be allowed to see) sealed with an authenticated cipher under a key of this process,
//! bound to what the caller must share with the call that handed it out (database, user).
//! So a cursor shows nothing of the name (its length only to the next 16 bytes), and one
//! the process did not make, changed, cut or used by another user or in another database
//! does not open. Stateless: no table of handed-out cursors to bound or to free.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

const NONCE: usize = 12;
/// Positions are padded to a multiple of this, so a cursor tells little of a name's length.
const BLOCK: usize = 16;
/// Ends a position before its padding (the name is binary: any byte may end it).
const END: u8 = 0x80;

pub struct CursorKey(ChaCha20Poly1305);

impl CursorKey {
    pub fn new(key: [u8; 32]) -> CursorKey {
        CursorKey(ChaCha20Poly1305::new(Key::from_slice(&key)))
    }

    /// The cursor (hex text, never `0`) for position `pos`, bound to `bind`; `nonce` must
    /// not repeat under this key (random).
    pub fn seal(&self, nonce: [u8; NONCE], bind: &[u8], pos: &[u8]) -> Vec<u8> {
        let mut msg = Vec::with_capacity((pos.len() / BLOCK + 1) * BLOCK);
        msg.extend_from_slice(pos);
        msg.push(END);
        msg.resize(msg.len().div_ceil(BLOCK) * BLOCK, 0);
        // Encrypting into a Vec fails only past the cipher's length limit (256 GiB).
        let sealed = self.0.encrypt(Nonce::from_slice(&nonce), Payload { msg: &msg, aad: bind }).unwrap_or_default();
        hex(nonce.iter().chain(&sealed))
    }

    /// The position sealed in `cursor` with the same `bind`; None for anything else.
    pub fn open(&self, bind: &[u8], cursor: &[u8]) -> Option<Vec<u8>> {
        let raw = unhex(cursor)?;
        if raw.len() <= NONCE {
            return None;
        }
        let (nonce, sealed) = raw.split_at(NONCE);
        let mut pos = self.0.decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: bind }).ok()?;
        let end = pos.iter().rposition(|&b| b != 0)?;
        (pos[end] == END).then(|| {
            pos.truncate(end);
            pos
        })
    }
}

fn hex<'a>(bytes: impl Iterator<Item = &'a u8>) -> Vec<u8> {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.flat_map(|b| [DIGITS[(b >> 4) as usize], DIGITS[(b & 15) as usize]]).collect()
}

fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    let digit = |d: u8| (d as char).to_digit(16).map(|v| v as u8);
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIND: &[u8] = b"\x00\x00\x00\x00alice";

    #[test]
    fn a_cursor_opens_to_its_position_only_with_its_key_and_binding() {
        let key = CursorKey::new([7; 32]);
        for pos in [&b""[..], b"q", b"secret_payroll", b"\x00\x80\x00", &[0x80; 16], &[0; 40]] {
            let c = key.seal([1; NONCE], BIND, pos);
            assert!(c.iter().all(u8::is_ascii_hexdigit) && c != b"0");
            assert_eq!(c.len() % 2, 0);
            assert_eq!(key.open(BIND, &c).as_deref(), Some(pos), "{pos:?}");
            assert_eq!(key.open(b"\x01\x00\x00\x00alice", &c), None, "another database");
            assert_eq!(key.open(b"\x00\x00\x00\x00bob", &c), None, "another user");
            assert_eq!(CursorKey::new([8; 32]).open(BIND, &c), None, "another process");
        }
    }

    #[test]
    fn a_cursor_hides_the_name_and_most_of_its_length() {
        let key = CursorKey::new([7; 32]);
        let c = key.seal([1; NONCE], BIND, b"secret_payroll");
        let raw = unhex(&c).unwrap();
        assert!(!raw.windows(6).any(|w| w == b"secret"));
        assert!(!c.windows(12).any(|w| w == hex(b"secret".iter()).as_slice()));
        assert_eq!(c.len(), key.seal([1; NONCE], BIND, b"a").len(), "names up to 15 bytes look alike");
        assert_ne!(c, key.seal([2; NONCE], BIND, b"secret_payroll"), "a fresh nonce, a fresh cursor");
    }

    #[test]
    fn forged_changed_or_cut_cursors_do_not_open() {
        let key = CursorKey::new([7; 32]);
        let good = key.seal([1; NONCE], BIND, b"app:1");
        let mut flipped = good.clone();
        flipped[30] = if flipped[30] == b'0' { b'1' } else { b'0' };
        for bad in [
            &b""[..],
            b"1",
            b"abc",
            b"zz",
            b"-1",
            &hex(b"app:1".iter()),
            &hex(b"secret_payroll".iter()),
            &good[..good.len() - 2],
            &good[..good.len() - 1],
            &good[..NONCE * 2],
            &flipped,
            &[good.as_slice(), b"00"].concat(),
        ] {
            assert_eq!(key.open(BIND, bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
