//! `kfdrt bench` shader figures: lane-instructions per second per core, the speed-up on all cores,
//! the emulator/host time ratio and the CPU time on all cores over one worker, for saxpy, a tiled
//! SGEMM and an LDS reduction (values depend on the machine: checked for presence, units and sanity
//! only).

mod common;

use common::bench_figures;

#[test]
fn shader_figures_are_reported_for_each_kernel() {
    let (figs, out) = bench_figures(&[
        "bench", "--quick", "--json", "--device", "emu", "--filter", "shader",
    ]);
    for k in ["saxpy 16M", "sgemm 512^3 tiled", "LDS reduction 16M"] {
        let get = |what: &str| -> (f64, String) {
            let name = format!("shader {k}: {what}");
            let f = figs
                .iter()
                .find(|f| f["name"] == name.as_str())
                .unwrap_or_else(|| panic!("no figure {name:?} in {out}"));
            (
                f["value"].as_f64().unwrap(),
                f["unit"].as_str().unwrap().to_string(),
            )
        };
        let (t, u) = get("1 worker");
        assert!(t > 0.0 && u == "ms", "{k}: {t} {u}");
        let (tn, u) = get("all cores");
        assert!(tn > 0.0 && u == "ms", "{k}: {tn} {u}");
        let (r, u) = get("lane-instructions/s per core");
        assert!(r > 0.0 && u == "M lane-instr/s", "{k}: {r} {u}");
        let (s, u) = get("speed-up on all cores");
        assert!(s > 0.0 && u == "x", "{k}: {s} {u}");
        let (h, u) = get("emulator/host Rust time");
        assert!(h > 0.0 && u == "x", "{k}: {h} {u}");
        // The process CPU clock counts nanoseconds: even a --quick run has the ratio.
        let (c, u) = get("CPU time on all cores / 1 worker");
        assert!(c > 0.0 && c.is_finite() && u == "x", "{k}: {c} {u}");
    }
}
