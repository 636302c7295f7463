//! Issue 11 item 3: an SDMA copy larger than one piece is submitted piece by piece (one
//! POLL_REGMEM handshake each), so copies of any size drain the ring; the bytes land.
//! Alone in its test binary: it sets `KFDRT_SDMA_PIECE_PACKETS` for the process.

mod common;

use common::emu;
use kfdrt::MemoryKind;

#[test]
fn sdma_copy_of_several_pieces_lands_intact() {
    // SAFETY: set before any other thread of this process reads the environment.
    std::env::set_var("KFDRT_SDMA_PIECE_PACKETS", "2");
    let dev = emu("emu:mi210");
    let len = 40usize << 20; // 4 MiB packets x 2 per piece: five pieces
    let a = dev.alloc(MemoryKind::Device, 0, len).unwrap();
    let b = dev.alloc(MemoryKind::Device, 0, len).unwrap();
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4093) as u8).collect();
    a.write(0, &data).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.memcpy(b.va(), a.va(), len as u64).unwrap();
    s.synchronize().unwrap();
    assert!(s.sdma_queue_id().is_some(), "the copy did not use SDMA");
    let mut out = vec![0u8; len];
    b.read(0, &mut out).unwrap();
    assert!(out == data, "copied bytes differ");
}
