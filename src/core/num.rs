//! Strict integer parsing, shared by argument parsing, settings and stored metadata.

/// A strict decimal integer: optional '-', digits only, no overflow.
pub fn parse_int(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?;
        v = if neg { v.checked_sub((c - b'0') as i64)? } else { v.checked_add((c - b'0') as i64)? };
    }
    Some(v)
}

/// Appends `v` in decimal. By hand: `to_string` allocates a string per number, and the hot
/// paths write numbers per message (records) or per slot (TPOP's queue names).
pub fn push_decimal(out: &mut Vec<u8>, v: i64) {
    if (0..10).contains(&v) {
        // Most numbers written are delivery counts: one digit, no buffer to copy.
        out.push(b'0' + v as u8);
        return;
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = v.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_as_format_writes_them() {
        for v in [0, 1, 9, 10, 11, 99, 100, 2000, -1, -9, -10, -12345, i64::MAX, i64::MIN] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"-42"), Some(-42));
        assert_eq!(parse_int(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
        for bad in ["", "-", "+1", "1.5", " 1", "1 ", "9223372036854775808", "1e3", "0x10", "١"] {
            assert_eq!(parse_int(bad.as_bytes()), None, "{bad}");
        }
    }
}
