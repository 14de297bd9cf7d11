"""theodolite.model: predict GEMM config times from a hardware profile, rank them, choose the fastest."""

from theodolite.model.predict import (
    BOTTLENECKS,
    ConfigTable,
    NoLegalConfigError,
    Prediction,
    choose,
    evaluate,
    predict,
    rank,
    table_for,
)

__all__ = [
    "BOTTLENECKS",
    "ConfigTable",
    "NoLegalConfigError",
    "Prediction",
    "choose",
    "evaluate",
    "predict",
    "rank",
    "table_for",
]
