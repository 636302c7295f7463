//! `kfdrt trace`: the Chrome trace JSON parses, has one named track per queue and engine
//! that ran, events in time order per track, the packets the demo workload submits; the
//! packet log lines parse; exit codes.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

mod common;

use common::{kfdrt, stderr, tmp};

struct Run {
    json: Value,
    log: String,
}

fn run_demo(dir: &str, device: &str) -> Run {
    run_workload(dir, device, "demo")
}

/// `kfdrt trace --device DEVICE --out D/t.json --log D/t.log ARGS`, which must succeed.
fn trace_into(d: &Path, device: &str, args: &[&str]) {
    let (out, log) = (d.join("t.json"), d.join("t.log"));
    let mut all = vec![
        "trace",
        "--device",
        device,
        "--out",
        out.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = kfdrt(&all);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
}

fn run_workload(dir: &str, device: &str, workload: &str) -> Run {
    let d = tmp(dir);
    let (out, log) = (d.join("t.json"), d.join("t.log"));
    trace_into(&d, device, &["--", workload]);
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap())
        .expect("the trace is valid JSON");
    let log = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    Run { json, log }
}

fn events(v: &Value) -> &Vec<Value> {
    v["traceEvents"].as_array().expect("traceEvents array")
}

#[test]
fn demo_trace_is_chrome_json_with_a_track_per_queue_and_engine() {
    let r = run_demo("demo", "emu:mi300x");
    let evs = events(&r.json);
    // Track names from thread_name metadata, per (pid, tid).
    let mut names: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut procs = BTreeSet::new();
    for e in evs.iter().filter(|e| e["ph"] == "M") {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        match e["name"].as_str().unwrap() {
            "thread_name" => {
                let n = e["args"]["name"].as_str().unwrap().to_string();
                assert!(names.insert(key, n).is_none(), "one thread_name per track");
            }
            "process_name" => {
                assert!(e["args"]["name"].as_str().unwrap().contains("mi300x"));
                procs.insert(key.0);
            }
            "thread_sort_index" => {}
            other => panic!("unexpected metadata {other}"),
        }
    }
    assert_eq!(procs, BTreeSet::from([1]), "one process per GPU");
    // Every event is on a named track; events are X (with dur) or instants.
    let mut per_track: BTreeMap<(u64, u64), Vec<&Value>> = BTreeMap::new();
    for e in evs.iter().filter(|e| e["ph"] != "M") {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert!(names.contains_key(&key), "event on an unnamed track: {e}");
        match e["ph"].as_str().unwrap() {
            "X" => assert!(e["dur"].as_f64().unwrap() >= 0.0),
            "i" => {}
            p => panic!("unexpected phase {p}"),
        }
        assert!(e["ts"].as_f64().is_some());
        per_track.entry(key).or_default().push(e);
    }
    // Engines: the CP and SDMA0 (the 2 MiB copy) ran.
    let track_names: BTreeSet<&str> = names.values().map(String::as_str).collect();
    assert!(track_names.contains("CP"), "{track_names:?}");
    assert!(track_names.contains("SDMA0"), "{track_names:?}");
    // Queues: the demo's three streams run on AQL queues (wait_value moves a stream to a
    // dedicated queue), and the big copy on an SDMA queue.
    let aql: Vec<&&str> = track_names
        .iter()
        .filter(|n| n.starts_with("CP queue ") && n.ends_with("(AQL)"))
        .collect();
    assert!(aql.len() >= 3, "AQL queue tracks: {aql:?}");
    let sdma: Vec<&&str> = track_names
        .iter()
        .filter(|n| n.starts_with("SDMA0 queue ") && n.ends_with("(SDMA)"))
        .collect();
    assert_eq!(sdma.len(), 1, "{track_names:?}");
    // Each track that has a name has events, and they are in time order (per track,
    // packets by start time; an IB's packets nest inside their AQL packet).
    for (key, n) in &names {
        let evs = per_track.get(key).map_or(&[][..], Vec::as_slice);
        assert!(!evs.is_empty(), "track {n} has no events");
        let ts: Vec<f64> = evs.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
        assert!(
            ts.windows(2).all(|w| w[0] <= w[1]),
            "track {n} out of order: {ts:?}"
        );
    }
    // Packet names that the workload submits, on the right kind of track.
    let mut packets: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (key, evs) in &per_track {
        let n = names[key].as_str();
        for e in evs.iter().filter(|e| e["cat"] == "packet") {
            packets
                .entry(e["name"].as_str().unwrap())
                .or_default()
                .insert(n);
            let d = e["args"]["disasm"].as_str().unwrap();
            assert!(d.contains(e["name"].as_str().unwrap()), "{d}");
        }
    }
    let on = |p: &str, prefix: &str| {
        packets
            .get(p)
            .is_some_and(|t| t.iter().any(|n| n.starts_with(prefix)))
    };
    for p in [
        "AMD_PM4_IB",
        "WRITE_DATA",
        "WAIT_REG_MEM",
        "DMA_DATA",
        "AMD_BARRIER_VALUE",
    ] {
        assert!(on(p, "CP queue"), "{p} on a CP queue: {packets:?}");
    }
    for p in ["COPY_LINEAR", "POLL_REGMEM", "FENCE"] {
        assert!(on(p, "SDMA0 queue"), "{p} on the SDMA queue: {packets:?}");
    }
    // Every IB packet lies inside an AMD_PM4_IB packet of its queue.
    for evs in per_track.values() {
        let ibs: Vec<(f64, f64)> = evs
            .iter()
            .filter(|e| e["name"] == "AMD_PM4_IB")
            .map(|e| {
                let t = e["ts"].as_f64().unwrap();
                (t, t + e["dur"].as_f64().unwrap())
            })
            .collect();
        for e in evs
            .iter()
            .filter(|e| e["cat"] == "packet" && e["args"]["ib_depth"].as_u64() == Some(1))
        {
            let t = e["ts"].as_f64().unwrap();
            let end = t + e["dur"].as_f64().unwrap();
            assert!(
                ibs.iter().any(|&(a, b)| a <= t && end <= b + 1e-3),
                "IB packet outside its AMD_PM4_IB: {e}"
            );
        }
    }
    // Engine events: interrupts (completion signals with an event mailbox), blocks on
    // the waitValue ping, and the engines parking.
    let instants: BTreeSet<&str> = evs
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for i in ["interrupt", "block", "unblock", "park", "wake"] {
        assert!(instants.contains(i), "{i} in {instants:?}");
    }

    // The packet log: one parsable line per packet event, same names, start order.
    let n_packets = evs.iter().filter(|e| e["cat"] == "packet").count();
    let lines: Vec<&str> = r.log.lines().collect();
    assert_eq!(lines.len(), n_packets);
    let mut last = 0.0f64;
    let mut names_in_log = BTreeSet::new();
    for l in &lines {
        let (prefix, dis) = l.split_once(" | ").expect("`PREFIX | DISASM`");
        let p: Vec<&str> = prefix.split_whitespace().collect();
        assert_eq!(p.len(), 6, "{l}");
        let start: f64 = p[0].parse().unwrap();
        let dur: f64 = p[1].parse().unwrap();
        assert!(start >= last && dur >= 0.0, "{l}");
        last = start;
        assert!(p[2].starts_with("gpu=0x"), "{l}");
        assert!(p[3] == "CP" || p[3].starts_with("SDMA"), "{l}");
        assert!(
            p[4].strip_prefix("q=").unwrap().parse::<u32>().is_ok(),
            "{l}"
        );
        assert!(
            p[5].strip_prefix("ib=").unwrap().parse::<u8>().is_ok(),
            "{l}"
        );
        let mut d = dis.split_whitespace();
        let off = d.next().unwrap();
        assert!(
            u64::from_str_radix(off.strip_prefix("0x").unwrap(), 16).is_ok(),
            "{l}"
        );
        let name = d.next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "{l}"
        );
        for f in d {
            let (k, v) = f
                .split_once('=')
                .unwrap_or_else(|| panic!("field {f} in {l}"));
            assert!(!k.is_empty() && !v.is_empty(), "{l}");
        }
        names_in_log.insert(name);
    }
    for p in [
        "AMD_PM4_IB",
        "WRITE_DATA",
        "COPY_LINEAR",
        "AMD_BARRIER_VALUE",
    ] {
        assert!(names_in_log.contains(p), "{p} in the log");
    }
}

#[test]
fn two_gpus_get_two_processes() {
    let r = run_demo("two", "emu:mi300x,rx7900xtx");
    let procs: BTreeSet<u64> = events(&r.json)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(procs, BTreeSet::from([1, 2]));
    // The demo runs on GPU 0 only.
    assert!(events(&r.json)
        .iter()
        .filter(|e| e["ph"] != "M")
        .all(|e| e["pid"] == 1));
}

#[test]
fn hardware_is_refused_with_exit_3() {
    let o = kfdrt(&["trace", "--device", "hw"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("trace needs the emulated device"));
}

#[test]
fn usage_errors_and_help() {
    let o = kfdrt(&["trace", "--", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown workload \"nosuch\""));
    let o = kfdrt(&["trace", "--bogus"]);
    assert_eq!(o.status.code(), Some(2));
    let o = kfdrt(&["trace", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(h.contains("EXAMPLES") && h.contains("EXIT CODES"));
    let o = kfdrt(&["help", "trace"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), h);
    let o = kfdrt(&[
        "trace",
        "--device",
        "emu",
        "--out",
        "/nonexistent-dir/t.json",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// `--dump-rings`: every ring and IB file decodes with `kfdrt disasm` (the command the
/// index names) into exactly the packet log's lines for that queue and IB depth, in
/// order; on two GPU families (the SDMA and PM4 layouts differ).
#[test]
fn dump_rings_round_trip_through_disasm() {
    for (device, target) in [("emu:mi300x", "gfx942"), ("emu:rx7900xtx", "gfx1100")] {
        dump_round_trip(device, target);
    }
}

fn dump_round_trip(device: &str, target: &str) {
    let d = tmp(&format!("dump-{target}"));
    let dump = d.join("rings");
    let log = d.join("t.log");
    trace_into(&d, device, &["--dump-rings", dump.to_str().unwrap()]);
    // The packet log per (gpu, queue, ib depth), in order.
    let mut logged: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let (head, dis) = line.split_once(" | ").expect("log line has ` | `");
        let f: Vec<&str> = head.split_whitespace().collect();
        let gpu = f[2].strip_prefix("gpu=").unwrap().to_string();
        let q = f[4].strip_prefix("q=").unwrap().to_string();
        let ib = f[5].strip_prefix("ib=").unwrap().to_string();
        logged
            .entry((gpu, q, ib))
            .or_default()
            .push(dis.to_string());
    }
    let index = std::fs::read_to_string(dump.join("index.txt")).unwrap();
    let mut decoded: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    let mut engines = BTreeSet::new();
    let mut targets = BTreeSet::new();
    for line in index.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (file, engine, gfx, gpu, q, ib, packets) = (f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
        assert!(
            file.contains(engine) && file.contains(gfx),
            "{file} names its engine and target"
        );
        engines.insert(engine.to_string());
        targets.insert(gfx.to_string());
        let o = kfdrt(&[
            "disasm",
            "--engine",
            engine,
            "--gfx",
            gfx,
            dump.join(file).to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{file}: {}", stderr(&o));
        let lines: Vec<String> = String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(lines.len().to_string(), packets, "{file}");
        decoded
            .entry((gpu.to_string(), q.to_string(), ib.to_string()))
            .or_default()
            .extend(lines);
    }
    assert_eq!(decoded, logged, "disasm of the dump = the packet log");
    for e in ["aql", "pm4", "sdma"] {
        assert!(engines.contains(e), "the demo uses {e}: {engines:?}");
    }
    assert_eq!(targets, BTreeSet::from([target.to_string()]));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn kernel_dispatches_are_on_the_cp_track_with_their_counts() {
    for (device, gfx) in [("emu:mi300x", "gfx942"), ("emu:mi250x", "gfx90a")] {
        let r = run_workload(&format!("kernels-{gfx}"), device, "kernels");
        let ev = events(&r.json);
        let cp_tid = ev
            .iter()
            .find(|e| e["name"] == "thread_name" && e["args"]["name"] == "CP")
            .and_then(|e| e["tid"].as_u64())
            .expect("a CP engine track");
        let d: Vec<&Value> = ev.iter().filter(|e| e["cat"] == "dispatch").collect();
        assert_eq!(d.len(), 2, "{gfx}: one slice per kernel: {d:?}");
        for e in &d {
            assert_eq!(e["tid"].as_u64(), Some(cp_tid), "{gfx}: {e}");
            assert_eq!(e["ph"], "X");
            assert_eq!(e["args"]["packet"], "KERNEL_DISPATCH");
            // Both kernels: 4096 work-items in groups of 256 = 16 work-groups of 4 waves.
            assert_eq!(e["args"]["workgroups"].as_u64(), Some(16), "{gfx}: {e}");
            assert_eq!(e["args"]["waves"].as_u64(), Some(64), "{gfx}: {e}");
            let i = e["args"]["instructions"].as_u64().unwrap();
            let li = e["args"]["lane_instructions"].as_u64().unwrap();
            assert!(i >= 64 * 10 && li >= i && li <= 64 * i, "{gfx}: {e}");
            assert!(e["args"].get("fault").is_none(), "{gfx}: {e}");
        }
        // The two dispatches came from two queues.
        let qs: BTreeSet<u64> = d
            .iter()
            .filter_map(|e| e["args"]["queue"].as_u64())
            .collect();
        assert_eq!(qs.len(), 2, "{gfx}: {d:?}");
    }
}
