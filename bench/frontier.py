"""The frontier `tessera sim autoscale --sweep` prints, computed from its JSON runs, for the bench
drivers that compare sweeps across seeds or clients (autoscale-seeds, servegen-frontiers)."""


def frontier(runs, policies, level):
    """Fewest GPU-hours among the runs of `policies` (names) whose SLO attainment reaches `level`
    (a fraction); None when none does."""
    costs = [r["gpu_hours"] for r in runs if r["policy"] in policies and r["slo_attainment"] >= level]
    return min(costs) if costs else None


def best_utilization(runs, policies, level):
    """Highest utilisation among the runs of `policies` reaching `level`; None when none does."""
    utils = [r["utilization"] for r in runs if r["policy"] in policies and r["slo_attainment"] >= level]
    return max(utils) if utils else None
