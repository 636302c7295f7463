//! `kfdrt bench` shader figures: lane-instructions per second per core, the speed-up on all cores,
//! the emulator/host time ratio, the CPU time on all cores over one worker, the machine's own
//! (native) speed-up, the parallel efficiency and the per-CPU rate ratio, for saxpy, a tiled
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
        // The machine's ceiling and what the emulator makes of it.
        let (ns, u) = get("native speed-up on all cores (machine ceiling)");
        assert!(ns > 0.0 && ns.is_finite() && u == "x", "{k}: {ns} {u}");
        let (rel, u) = get("speed-up / native speed-up");
        assert!(
            u == "x" && (rel - s / ns).abs() <= 0.05 * rel.max(s / ns),
            "{k}: {rel} {u}, speed-up {s} / native {ns}"
        );
        // Work-groups per wall ms over the workers' summed rates, all cores over one
        // worker (either may have been preempted more: no bound but a ratio).
        let (e, u) = get("parallel efficiency (all cores / 1 worker)");
        assert!(e > 0.0 && e.is_finite() && u == "x", "{k}: {e} {u}");
        let (pr, u) = get("per-CPU rate, all cores / 1 worker");
        assert!(pr > 0.0 && pr.is_finite() && u == "x", "{k}: {pr} {u}");
        // Cores x efficiency x rate ratio.
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get()) as f64;
        let (eq, u) = get("speed-up at equal CPU speeds");
        assert!(
            u == "x" && (eq - cores * e * pr).abs() <= 0.05 * eq.max(cores * e * pr),
            "{k}: {eq} {u}, efficiency {e}, rate ratio {pr}"
        );
    }
}
