//! Topic and cluster routing (core::route): the slot of a message agrees with a bitwise
//! CRC-32 and `basis mod slots`; queue names split back into topic and slot; a key's
//! cluster slot agrees with a bitwise CRC16 over its hash tag.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rmq::core::route::*;

#[derive(Arbitrary, Debug)]
struct Input {
    topic: Vec<u8>,
    basis: Vec<u8>,
    log_slots: u8,
    slot: u16,
    name: Vec<u8>,
}

/// CRC-32 (IEEE, reflected), bit by bit.
fn crc32(b: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in b {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// CRC16-CCITT (XMODEM), bit by bit, and the cluster's hash tag rule.
fn key_slot_ref(key: &[u8]) -> u16 {
    let mut k = key;
    if let Some(open) = key.iter().position(|&c| c == b'{') {
        if let Some(close) = key[open + 1..].iter().position(|&c| c == b'}') {
            if close > 0 {
                k = &key[open + 1..open + 1 + close];
            }
        }
    }
    let mut crc: u32 = 0;
    for &byte in k {
        for i in (0..8).rev() {
            let bit = ((byte >> i) & 1) as u32 ^ ((crc >> 15) & 1);
            crc = ((crc << 1) & 0xffff) ^ if bit != 0 { 0x1021 } else { 0 };
        }
    }
    (crc % 16384) as u16
}

fuzz_target!(|inp: Input| {
    let slots = 1u32 << (inp.log_slots % 15);
    let name = queue_for(&inp.topic, slots, &inp.basis);
    let want = crc32(&inp.basis) % slots;
    assert_eq!(crc32fast::hash(&inp.basis), crc32(&inp.basis));
    assert_eq!(name, queue_name(&inp.topic, want));
    assert_eq!(split(&name), Some((&inp.topic[..], want)));
    let slot = inp.slot as u32 % MAX_SLOTS;
    assert_eq!(split(&queue_name(&inp.topic, slot)), Some((&inp.topic[..], slot)));
    if let Some((topic, slot)) = split(&inp.name) {
        assert!(slot < MAX_SLOTS);
        assert_eq!(queue_name(topic, slot), inp.name);
    }
    assert_eq!(key_slot(&inp.name), key_slot_ref(&inp.name));
    assert!(key_slot(&inp.name) < 16384);
});
