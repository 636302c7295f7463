//! `kfdrt bench` kernel figures: `--filter "kernel launch"` selects the empty-kernel launch enqueue
//! (with and without arguments) and launch-to-completion figures, and the `bench-insn` probe child
//! that callgrind counts runs its `launch` and `launch_args` operations (values depend on the
//! machine: checked for presence, units and sanity only).

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
        (
            "kernel launch enqueue (vadd: 4 arguments + hidden)",
            "ns/op",
        ),
    ] {
        let f = figs
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no figure {name:?} in {out}"));
        assert!(f["value"].as_f64().unwrap() > 0.0, "{name}");
        assert_eq!(f["unit"], unit, "{name}");
    }
    assert_eq!(figs.len(), 3, "only the kernel figures: {out}");
}

#[test]
fn the_launch_probe_child_runs() {
    for op in ["launch", "launch_args"] {
        let o = kfdrt(&["bench-insn", "--device", "emu", op, "40"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{op}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
