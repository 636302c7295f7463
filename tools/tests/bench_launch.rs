//! `kfdrt bench` kernel figures: `--filter "kernel launch"` selects the empty-kernel launch
//! enqueue and launch-to-completion figures, and the `bench-insn` probe child that
//! callgrind counts runs its `launch` operation (values depend on the machine: checked for
//! presence, units and sanity only).

mod common;

use common::{bench_figures, kfdrt};

#[test]
fn kernel_launch_figures_are_selected_by_filter() {
    let (figs, out) = bench_figures(&[
        "bench",
        "--quick",
        "--json",
        "--device",
        "emu",
        "--filter",
        "kernel launch",
    ]);
    for (name, unit) in [
        ("kernel launch enqueue (empty kernel)", "ns/op"),
        ("kernel launch->completion (empty kernel, host spin)", "ns"),
    ] {
        let f = figs
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no figure {name:?} in {out}"));
        assert!(f["value"].as_f64().unwrap() > 0.0, "{name}");
        assert_eq!(f["unit"], unit, "{name}");
    }
    assert_eq!(figs.len(), 2, "only the kernel figures: {out}");
}

#[test]
fn the_launch_probe_child_runs() {
    let o = kfdrt(&["bench-insn", "--device", "emu", "launch", "40"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
