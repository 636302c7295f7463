//! Memory IPC of single buffers (`Device::ipc_export` / `Device::ipc_open`, HIP's
//! `hipIpc*MemHandle`) between two real processes: the parent exports a device buffer and
//! sends handles (base, an inner address, a freed buffer's) to a child test process; the
//! child maps them, reads the parent's bytes, writes with its own GPU, and gets clean
//! errors for the freed buffer and for forged handles. The parent then sees the write.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use kfdrt::{ErrorKind, IpcMemHandle, MemoryKind, WriteValueFlags};

const CHILD_ENV: &str = "KFDRT_IPC_CHILD";
const LEN: usize = 1 << 20;

fn hex(h: &IpcMemHandle) -> String {
    h.reserved.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> IpcMemHandle {
    let mut reserved = [0u8; 64];
    for (i, r) in reserved.iter_mut().enumerate() {
        *r = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).unwrap();
    }
    IpcMemHandle { reserved }
}

fn cell(addr: u64) -> &'static AtomicU32 {
    // SAFETY: `addr` is a live, CPU-mapped, 4-byte aligned mapping kept alive by the caller
    // while the reference is used.
    unsafe { AtomicU32::from_ptr(addr as *mut u32) }
}

fn pattern(i: usize) -> u8 {
    (i * 7 + 3) as u8
}

/// Eight pinned buffers filled with 0xff, allocated after an event's drop: a block freed
/// too early would be reused by one of them, and a queued write would land in it.
fn fillers(dev: &kfdrt::Device) -> Vec<kfdrt::Buffer> {
    let ones = vec![0xffu8; 4096];
    (0..8)
        .map(|_| {
            let f = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
            f.write(0, &ones).unwrap();
            f
        })
        .collect()
}

/// Every filler still holds 0xff only.
fn assert_untouched(fillers: &[kfdrt::Buffer], why: &str) {
    for f in fillers {
        let mut back = vec![0u8; 4096];
        f.read(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 0xff), "{why}");
    }
}

/// Child mode: the handles arrive on stdin (one line: base, inner, freed).
fn child() {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let mut it = line.split_whitespace();
    let (base, inner, freed) = (
        unhex(it.next().unwrap()),
        unhex(it.next().unwrap()),
        unhex(it.next().unwrap()),
    );
    let dev = common::emu("emu:mi210");
    let m = dev.ipc_open(0, &base).unwrap();
    assert_eq!(m.ptr(), m.base(), "the base handle has offset 0");
    assert!(m.len() >= LEN);
    // SAFETY: the mapping is CPU-visible for `LEN` bytes while `m` lives.
    let bytes = unsafe { std::slice::from_raw_parts(m.ptr() as *const u8, LEN) };
    let bad = (0..LEN).filter(|&i| bytes[i] != pattern(i)).count();
    assert_eq!(bad, 0, "the parent's bytes");
    let m2 = dev.ipc_open(0, &inner).unwrap();
    assert_eq!(m2.ptr() - m2.base(), 4096, "the inner handle's offset");
    // SAFETY: as above, for m2.
    assert_eq!(unsafe { *(m2.ptr() as *const u8) }, pattern(4096));
    drop(m2);
    // Our GPU writes into the shared memory.
    let s = dev.create_stream(0).unwrap();
    s.write_value32(m.ptr() + 8, 0xBEEF, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    let e = dev.ipc_open(0, &freed).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "freed buffer: {e}");
    let mut forged = base;
    forged.reserved[16] ^= 1; // the buffer's inode
    let e = dev.ipc_open(0, &forged).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "other inode: {e}");
    let mut forged = base;
    forged.reserved[0] ^= 1;
    assert_eq!(
        dev.ipc_open(0, &forged).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    let mut forged = base;
    forged.reserved[43] = 0xff; // offset (bytes 40..48) past the buffer
    assert_eq!(
        dev.ipc_open(0, &forged).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    drop(m);
    println!("CHILD-OK");
}

#[test]
fn ipc_buffer_between_two_processes() {
    if std::env::var(CHILD_ENV).is_ok() {
        child();
        return;
    }
    let dev = common::emu("emu:mi210");
    let buf = dev.alloc(MemoryKind::Device, 0, LEN).unwrap();
    let data: Vec<u8> = (0..LEN).map(pattern).collect();
    buf.write(0, &data).unwrap();
    let ex = dev.ipc_export(&buf).unwrap();
    let base = ex.handle(buf.va()).unwrap();
    assert_eq!(ex.handle(buf.va()).unwrap(), base, "stable");
    let inner = ex.handle(buf.va() + 4096).unwrap();
    assert_ne!(inner, base);
    assert_eq!(inner.offset(), 4096);
    assert_eq!(
        ex.handle(buf.va() + buf.len() as u64).unwrap_err().kind(),
        ErrorKind::InvalidValue,
        "outside the buffer"
    );
    let gone = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    let gone_ex = dev.ipc_export(&gone).unwrap();
    let freed = gone_ex.handle(gone.va()).unwrap();
    drop(gone_ex);
    drop(gone);

    let mut c = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ipc_buffer_between_two_processes", "--nocapture"])
        .env(CHILD_ENV, "1")
        .env("KFDRT_DEVICE", "emu:mi210")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    writeln!(stdin, "{} {} {}", hex(&base), hex(&inner), hex(&freed)).unwrap();
    drop(stdin);
    // Bounded: a child that hangs fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(c.wait_with_output()));
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(300))
        .expect("child did not finish within 300 s")
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(
        BufReader::new(out.stdout.as_slice())
            .lines()
            .any(|l| l.unwrap() == "CHILD-OK"),
        "child did not run its checks:\n{text}"
    );
    assert_eq!(
        cell(buf.va() + 8).load(Ordering::Acquire),
        0xBEEF,
        "child's GPU write"
    );
    // The rest is untouched.
    let mut back = vec![0u8; 16];
    buf.read(0, &mut back).unwrap();
    assert_eq!(&back[..8], &data[..8]);
    assert_eq!(&back[12..], &data[12..16]);
    drop(ex);
}

/// An interprocess event opened from its own handle (the import path of another process,
/// here in one): a record behind a host gate is seen as pending through both objects, a
/// stream waiting on the opened one holds its write until the gate opens, and a record on
/// the opened one is seen by the original. A forged handle is refused.
#[test]
fn ipc_event_records_waits_and_queries_through_its_handle() {
    let dev = common::emu("emu:mi210");
    let ev = dev.create_ipc_event(0).unwrap();
    ev.query().unwrap();
    let h = ev.handle().unwrap();
    let other = dev.ipc_open_event(0, &h).unwrap();
    assert_eq!(
        other.handle().unwrap_err().kind(),
        ErrorKind::InvalidValue,
        "an opened event is not re-exported"
    );
    let gate = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let out = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    a.wait_value32(gate.va(), 1, kfdrt::WaitCompare::Gte, u32::MAX)
        .unwrap();
    ev.record(&a).unwrap();
    assert_eq!(ev.query().unwrap_err().kind(), ErrorKind::NotReady);
    assert_eq!(other.query().unwrap_err().kind(), ErrorKind::NotReady);
    other.stream_wait(&b).unwrap();
    b.write_value32(out.va(), 7, WriteValueFlags::DEFAULT)
        .unwrap();
    assert_eq!(
        b.synchronize_timeout(std::time::Duration::from_millis(50))
            .unwrap_err()
            .kind(),
        ErrorKind::NotReady
    );
    assert_eq!(
        cell(out.va()).load(Ordering::Acquire),
        0,
        "held by the event"
    );
    cell(gate.va()).store(1, Ordering::Release);
    other.synchronize().unwrap();
    b.synchronize().unwrap();
    assert_eq!(cell(out.va()).load(Ordering::Acquire), 7);
    ev.query().unwrap();
    // A record through the opened event, seen by the original.
    other.record(&b).unwrap();
    b.synchronize().unwrap();
    ev.query().unwrap();
    let mut forged = h;
    forged.reserved[16] ^= 1;
    assert_eq!(
        dev.ipc_open_event(0, &forged).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    // A buffer's handle is not an event's.
    let buf = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    let ex = dev.ipc_export(&buf).unwrap();
    assert_eq!(
        dev.ipc_open_event(0, &ex.handle(buf.va()).unwrap())
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
}

/// An interprocess event destroyed (the creator's, or an opener's) while a record's write
/// and a stream's wait on it are still queued behind a gate: its block stays allocated and
/// mapped until they have run. Freed early, the buffers allocated next could take its
/// address: the wait would read their bytes (all ones: satisfied early) and the record's
/// write would land in them, or the packets would fault on the unmapped address.
/// The same with the record on the null stream whose last handle is dropped while its
/// work is queued: the device keeps the busy null stream (it holds null streams only
/// weakly), so the event's block stays with it until the record ran, and the next
/// `null_stream` handle is that same stream.
#[test]
fn a_dropped_busy_null_stream_keeps_the_event_block_its_record_names() {
    let dev = common::emu("emu:mi210");
    let b = dev.create_stream(0).unwrap();
    let out = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let null = dev.null_stream(0).unwrap();
    let gate = common::Gate::new(&dev);
    gate.hold(&null);
    let ev = dev.create_ipc_event(0).unwrap();
    ev.record(&null).unwrap();
    ev.stream_wait(&b).unwrap();
    b.write_value32(out.va(), 7, WriteValueFlags::DEFAULT)
        .unwrap();
    drop(null);
    drop(ev);
    let fillers = fillers(&dev);
    assert_eq!(cell(out.va()).load(Ordering::Acquire), 0, "b still waits");
    // The busy null stream is still the device's: a new handle is not idle.
    let again = dev.null_stream(0).unwrap();
    assert!(
        again.query().is_err(),
        "a fresh null stream replaced the busy one"
    );
    gate.open();
    let sync = std::time::Duration::from_secs(20);
    again.synchronize_timeout(sync).unwrap();
    b.synchronize_timeout(sync).unwrap();
    assert_eq!(cell(out.va()).load(Ordering::Acquire), 7);
    assert_untouched(&fillers, "a buffer allocated after the drop was written");
}

#[test]
fn a_destroyed_ipc_event_outlives_its_queued_record_and_wait() {
    let dev = common::emu("emu:mi210");
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let out = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let sync = std::time::Duration::from_secs(20);
    for (i, opened) in [false, true].into_iter().enumerate() {
        let gate = common::Gate::new(&dev);
        gate.hold(&a);
        let created = dev.create_ipc_event(0).unwrap();
        let (ev, creator) = if opened {
            let h = created.handle().unwrap();
            (dev.ipc_open_event(0, &h).unwrap(), Some(created))
        } else {
            (created, None)
        };
        ev.record(&a).unwrap();
        ev.stream_wait(&b).unwrap();
        let word = out.va() + 4 * i as u64;
        b.write_value32(word, 7, WriteValueFlags::DEFAULT).unwrap();
        drop(ev);
        drop(creator);
        let fillers = fillers(&dev);
        assert_eq!(
            cell(word).load(Ordering::Acquire),
            0,
            "b still waits for the record (opened: {opened})"
        );
        gate.open();
        a.synchronize_timeout(sync).unwrap();
        b.synchronize_timeout(sync).unwrap();
        assert_eq!(cell(word).load(Ordering::Acquire), 7);
        assert_untouched(
            &fillers,
            &format!("a buffer allocated after the drop was written (opened: {opened})"),
        );
    }
}
