"""Data mining kernels of the suite: covariance and correlation (PolyBench/C 4.2)."""

from __future__ import annotations

import polytri as pt


# ---------------------------------------------------------------------------------------------------
# data mining
# ---------------------------------------------------------------------------------------------------
def build_covariance() -> pt.Program:
    """Covariance of the M columns of data (N samples); data is centred in place."""
    p = pt.Program("covariance", params=["M", "N"])
    p.array("data", ("N", "M"))
    p.array("cov", ("M", "M"))
    p.array("mean", ("M",))
    with p.loop("j", 0, "M"):
        p.assign("mean[j] = 0.0")
        with p.loop("i", 0, "N"):
            p.assign("mean[j] += data[i, j]")
        p.assign("mean[j] /= N")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("data[i, j] -= mean[j]")
    with p.loop("i", 0, "M"):
        with p.loop("j", "i", "M"):
            p.assign("cov[i, j] = 0.0")
            with p.loop("k", 0, "N"):
                p.assign("cov[i, j] += data[k, i] * data[k, j]")
            p.assign("cov[i, j] /= N - 1.0")
            p.assign("cov[j, i] = cov[i, j]")
    return p


def build_correlation() -> pt.Program:
    """Pearson correlation of the M columns of data; columns with stddev <= eps are left unscaled."""
    p = pt.Program("correlation", params=["M", "N"])
    p.assume("M >= 1")
    p.array("data", ("N", "M"))
    p.array("corr", ("M", "M"))
    p.array("mean", ("M",))
    p.array("stddev", ("M",))
    p.scalar("eps")
    with p.loop("j", 0, "M"):
        p.assign("mean[j] = 0.0")
        with p.loop("i", 0, "N"):
            p.assign("mean[j] += data[i, j]")
        p.assign("mean[j] /= N")
    with p.loop("j", 0, "M"):
        p.assign("stddev[j] = 0.0")
        with p.loop("i", 0, "N"):
            p.assign("stddev[j] += (data[i, j] - mean[j]) * (data[i, j] - mean[j])")
        p.assign("stddev[j] /= N")
        p.assign("stddev[j] = sqrt(stddev[j])")
        p.assign("stddev[j] = where(stddev[j] <= eps, 1.0, stddev[j])")
    with p.loop("i", 0, "N"):
        with p.loop("j", 0, "M"):
            p.assign("data[i, j] -= mean[j]")
            p.assign("data[i, j] /= sqrt(N) * stddev[j]")
    with p.loop("i", 0, "M - 1"):
        p.assign("corr[i, i] = 1.0")
        with p.loop("j", "i + 1", "M"):
            p.assign("corr[i, j] = 0.0")
            with p.loop("k", 0, "N"):
                p.assign("corr[i, j] += data[k, i] * data[k, j]")
            p.assign("corr[j, i] = corr[i, j]")
    p.assign("corr[M - 1, M - 1] = 1.0")
    return p
