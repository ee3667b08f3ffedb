//! Receipt handles: what one names (a delivery, and its message), made and read under the
//! queue's own key (docs/GATEWAY_FORMAT.md).

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::errors::{SqsError, SqsResult};
use crate::queue::Queue;

/// The receipt handle format's version byte (docs/GATEWAY_FORMAT.md; 1 carried the message,
/// 2 named only the delivery, and is still accepted).
const HANDLE_VERSION: u8 = 3;

/// Version byte, delivery id, MessageId, MAC.
const HANDLE_LEN: usize = 1 + 8 + 16 + 16;

const V2_HANDLE_LEN: usize = 1 + 8 + 16;

/// What a receipt handle names: the delivery, and the message (its MessageId: the key of its
/// first receive's record, crate::first_receive; none in a version 2 handle).
#[derive(Debug)]
pub struct Named {
    pub delivery: u64,
    pub message: Option<uuid::Uuid>,
}

/// A receipt handle names one delivery: RMQ's id for it (`RMQ.POP ... IDS`, unique in the
/// queue for good) and the message's MessageId, under an HMAC by the queue's own key over
/// them and the queue's name (the key is kept in Redis, so every gateway and every restart
/// accepts it, and a forged handle is told from a stale one). 55 characters whatever the
/// message.
pub fn make_handle(q: &Queue, id: u64, message: &uuid::Uuid) -> String {
    let mut b = [0u8; HANDLE_LEN];
    b[0] = HANDLE_VERSION;
    b[1..9].copy_from_slice(&id.to_be_bytes());
    b[9..25].copy_from_slice(message.as_bytes());
    let mac = handle_mac(q, &b[..25]);
    b[25..].copy_from_slice(&mac);
    B64URL.encode(b)
}

fn handle_mac(q: &Queue, data: &[u8]) -> [u8; 16] {
    // HMAC takes a key of any length.
    let mut m = q.mac.get_or_init(|| <Hmac<Sha256> as KeyInit>::new_from_slice(&q.handle_key()).unwrap_or_else(|_| unreachable!())).clone();
    m.update(data);
    m.update(q.name.as_bytes());
    let full = m.finalize().into_bytes();
    let mut out = [0u8; 16];
    out.copy_from_slice(&full[..16]);
    out
}

/// What a handle names, if it is a handle of this queue (handles of the first format, which
/// carried the message, are refused: docs/GATEWAY_FORMAT.md).
pub fn read_handle(q: &Queue, handle: &str) -> SqsResult<Named> {
    let invalid = || {
        SqsError::receipt_handle_is_invalid(format!(
            "The input receipt handle \"{}\" is not a valid receipt handle.",
            handle.chars().take(64).collect::<String>()
        ))
    };
    let b = B64URL.decode(handle).map_err(|_| invalid())?;
    let data_len = match (b.first(), b.len()) {
        (Some(&HANDLE_VERSION), HANDLE_LEN) => 25,
        (Some(2), V2_HANDLE_LEN) => 9,
        _ => return Err(invalid()),
    };
    let (data, mac) = b.split_at(data_len);
    let expected = handle_mac(q, data);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], mac)) {
        return Err(invalid());
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&data[1..9]);
    let message = data.get(9..25).and_then(|m| uuid::Uuid::from_slice(m).ok());
    Ok(Named { delivery: u64::from_be_bytes(id), message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn queue() -> Queue {
        Queue::new("q1".into(), HashMap::from([("hkey".to_string(), "00112233".to_string())]))
    }

    #[test]
    fn handles_round_trip_and_refuse_forgeries() {
        let q = queue();
        let m = uuid::Uuid::from_bytes([9; 16]);
        let h = make_handle(&q, 98_140_331_957_248, &m);
        assert_eq!(h.len(), 55, "short, whatever the message");
        let named = read_handle(&q, &h).unwrap();
        assert_eq!((named.delivery, named.message), (98_140_331_957_248, Some(m)));
        let mut other = queue();
        other.attrs.insert("hkey".into(), "44".into());
        assert_eq!(read_handle(&other, &h).unwrap_err().code, "ReceiptHandleIsInvalid");
        let renamed = Queue::new("q2".into(), queue().attrs);
        assert_eq!(read_handle(&renamed, &h).unwrap_err().code, "ReceiptHandleIsInvalid", "the MAC covers the queue's name");
        let mut raw = B64URL.decode(&h).unwrap();
        raw[1] ^= 1;
        assert_eq!(read_handle(&q, &B64URL.encode(&raw)).unwrap_err().code, "ReceiptHandleIsInvalid");
        raw[1] ^= 1;
        raw[0] = 1;
        assert_eq!(read_handle(&q, &B64URL.encode(&raw)).unwrap_err().code, "ReceiptHandleIsInvalid", "another version");
        assert_eq!(read_handle(&q, &h[..54]).unwrap_err().code, "ReceiptHandleIsInvalid");
        // A version 2 handle (delivery id and MAC) still names its delivery.
        let mut v2 = vec![2u8];
        v2.extend_from_slice(&7u64.to_be_bytes());
        let mac = handle_mac(&q, &v2);
        v2.extend_from_slice(&mac);
        let named = read_handle(&q, &B64URL.encode(&v2)).unwrap();
        assert_eq!((named.delivery, named.message), (7, None));
        v2[3] ^= 1;
        assert_eq!(read_handle(&q, &B64URL.encode(&v2)).unwrap_err().code, "ReceiptHandleIsInvalid");
        assert_eq!(read_handle(&q, "not base64!").unwrap_err().code, "ReceiptHandleIsInvalid");
        assert_eq!(read_handle(&q, "").unwrap_err().code, "ReceiptHandleIsInvalid");
    }
}
