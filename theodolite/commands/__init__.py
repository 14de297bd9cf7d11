"""One module per CLI subcommand, each with ``add_arguments(parser)`` and ``run(args) -> int``.

A module is imported only when its command runs, so ``--help`` and the
profile commands stay fast and need no GPU stack.
"""

# (command name, module, one-line help) in the order --help lists them.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("calibrate", "theodolite.commands.calibrate", "measure this GPU into a hardware profile"),
    ("select", "theodolite.commands.select", "pick the GEMM config for shapes from a profile"),
    ("bench", "theodolite.commands.bench", "time every kernel config against torch.matmul"),
    ("bench-linear", "theodolite.commands.bench_linear", "time a decoder's projections: F.linear against theodolite"),
    ("validate", "theodolite.commands.validate", "measure the model's picks against the exhaustive best"),
    ("report", "theodolite.commands.report", "render HTML reports of a profile or a results file"),
    ("compare", "theodolite.commands.compare", "side-by-side of two profiles"),
    ("check", "theodolite.commands.check", "bring-up check of a card, a node or a fleet against a reference"),
    ("profile", "theodolite.commands.profile", "show or diff hardware profiles"),
)
