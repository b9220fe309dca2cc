"""The fixed C helpers every generated file starts with (integer division, rounding, min/max, powers)."""

from __future__ import annotations

HEADER = """\
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define PT_HELPER static inline __attribute__((unused))

/* With glibc's vector math library (-DPT_LIBMVEC -lmvec, option simd): SIMD versions of the math
   functions, called by vectorized loops for 8 or 16 elements at once.  Their error is at most 4 ulp
   (glibc's scalar functions: under 1 ulp). */
#if defined(_OPENMP) && defined(PT_LIBMVEC)
#pragma omp declare simd notinbranch
float expf(float);
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
float logf(float);
#pragma omp declare simd notinbranch
double log(double);
#pragma omp declare simd notinbranch
float tanhf(float);
#pragma omp declare simd notinbranch
double tanh(double);
#pragma omp declare simd notinbranch
float erff(float);
#pragma omp declare simd notinbranch
double erf(double);
#endif

/* Floor division and modulo with Python's sign rules; division by zero gives 0 (as numpy does) and
   INT64_MIN // -1 wraps around instead of trapping. */
PT_HELPER int64_t pt__floordiv_i64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0 - (uint64_t)a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
PT_HELPER int64_t pt__mod_i64(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
/* The same by a divisor known to be positive (a constant: a reshape's i // 128, i % 128), without the
   branches: gcc vectorized a loop reading t[i // 128][i % 128][j] in its sequential copy but not in its
   OpenMP region with the general helpers ("data ref analysis failed"), and a GELU there ran scalar. */
PT_HELPER int64_t pt__floordivp_i64(int64_t a, int64_t b) { const int64_t r = a % b; return a / b - (r < 0); }
PT_HELPER int64_t pt__modp_i64(int64_t a, int64_t b) { const int64_t r = a % b; return r < 0 ? r + b : r; }
/* Float floor division and modulo as numpy computes them (Python's divmod; a zero divisor gives
   a / b and fmod(a, 0) = NaN). */
PT_HELPER double pt__floordiv_f64(double a, double b) {
  if (b == 0) return a / b;
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  return (div - fl > 0.5) ? fl + 1.0 : fl;
}
PT_HELPER float pt__floordiv_f32(float a, float b) {
  if (b == 0) return a / b;
  float mod = fmodf(a, b), div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1.0f;
  if (div == 0) return copysignf(0.0f, a / b);
  float fl = floorf(div);
  return (div - fl > 0.5f) ? fl + 1.0f : fl;
}
PT_HELPER double pt__mod_f64(double a, double b) {
  double mod = fmod(a, b);
  if (b == 0) return mod;
  if (mod == 0) return copysign(0.0, b);
  return ((b < 0) != (mod < 0)) ? mod + b : mod;
}
PT_HELPER float pt__mod_f32(float a, float b) {
  float mod = fmodf(a, b);
  if (b == 0) return mod;
  if (mod == 0) return copysignf(0.0f, b);
  return ((b < 0) != (mod < 0)) ? mod + b : mod;
}
PT_HELPER int64_t pt__abs_i64(int64_t a) { return a < 0 ? -a : a; }

/* 16-bit floats are computed in float and rounded after every operation. */
PT_HELPER float pt__round_f16(float x) { return (float)(_Float16)x; }
PT_HELPER float pt__bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f;
}
PT_HELPER uint16_t pt__f32_to_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
PT_HELPER float pt__round_bf16(float x) { return pt__bf16_to_f32(pt__f32_to_bf16(x)); }
/* e^x in float for every x, in straight-line code that gcc vectorizes: glibc's vector expf calls its
   scalar expf lane by lane wherever |x| > 87.3, which a masked softmax's scores (-inf, -3.4e38) reach on
   most lanes (a causal softmax ran 7x slower).  x = k ln2 + r with |r| <= ln2 / 2 (ln2 in two parts);
   e^r by its Taylor polynomial of degree 7; 2^k as a product of two powers of two, each a normal float,
   so that a result below FLT_MIN is rounded once.  Under 1 ulp from e^x over the floats in [-110, 90]
   (every 7th bit pattern checked against double precision); 0 below -104, infinity above 88.73; a NaN
   is returned as it came. */
PT_HELPER float pt__expf(float x) {
  float c = x > -104.0f ? x : -104.0f;
  c = c < 89.0f ? c : 89.0f;
  const float k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = fmaf(k, -0.693145751953125f, c);
  r = fmaf(k, -1.42860676533018708e-06f, r);
  float p = 1.98412698e-4f;
  p = fmaf(p, r, 1.38888889e-3f);
  p = fmaf(p, r, 8.33333333e-3f);
  p = fmaf(p, r, 4.16666667e-2f);
  p = fmaf(p, r, 1.66666667e-1f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const int32_t ki = (int32_t)k, k1 = ki >> 1, k2 = ki - k1;
  const uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, 4);
  memcpy(&s2, &b2, 4);
  const float y = p * s1 * s2;
  return x != x ? x : y;
}
/* erf(x) in float in straight-line code that gcc vectorizes (glibc's vector erff took 0.35 ns an element
   on Zen 5, this 0.25 ns): with a = min(|x|, 4), below 1 the odd polynomial a * P(a^2) (degree 6 in a^2),
   from 1 on 1 - N(u) / D(u) with u = a - 2.5 (degrees 6 and 5: erfc on [1, 4] centred, so the terms do not
   cancel), both fitted here by iterated weighted least squares for the least maximal error.  Every
   positive float checked against erf in double: at most 2.78 ulp (at 1.0018); 1 from 3.92 on, where erf
   rounds to 1; odd by copysign; a NaN is returned as it came. */
PT_HELPER float pt__erff(float x) {
  const float b = fabsf(x), a = b < 4.0f ? b : 4.0f, s = a * a, u = a - 2.5f;
  float p = 7.85151497e-05f;
  p = fmaf(p, s, -0.000800946378f);
  p = fmaf(p, s, 0.00518824207f);
  p = fmaf(p, s, -0.0268537644f);
  p = fmaf(p, s, 0.112835839f);
  p = fmaf(p, s, -0.37612626f);
  p = fmaf(p, s, 1.12837911f);
  float n = 9.59224199e-05f;
  n = fmaf(n, u, -0.00063229521f);
  n = fmaf(n, u, 0.00181691232f);
  n = fmaf(n, u, -0.00295713474f);
  n = fmaf(n, u, 0.00290076714f);
  n = fmaf(n, u, -0.00162818644f);
  n = fmaf(n, u, 0.000406930892f);
  float d = 0.00940769911f;
  d = fmaf(d, u, 0.0954106525f);
  d = fmaf(d, u, 0.404994965f);
  d = fmaf(d, u, 0.978477657f);
  d = fmaf(d, u, 1.35152912f);
  d = fmaf(d, u, 1.0f);
  const float r = a < 1.0f ? a * p : b < 3.92f ? 1.0f - n / d : 1.0f;
  return x != x ? x : copysignf(r, x);
}
PT_HELPER float pt__sigmoid_f32(float x) { return 1.0f / (1.0f + pt__expf(-x)); }
PT_HELPER double pt__sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }

/* Whether a parallel region pays: its loop of `trips` iterations, split statically over `threads`,
   saves the fraction 1 - ceil(trips / threads) / trips of the one-thread time of `work` operations;
   `min_work` is the break-even for a loop that splits evenly (saving 1 - 1 / threads). */
PT_HELPER bool pt__region_pays(double work, double trips, int threads, double min_work) {
  if (trips < 2) return false;
  double saved = 1.0 - ceil(trips / threads) / trips;
  return work * saved >= min_work * (1.0 - 1.0 / threads);
}
"""

_MINMAX = """\
PT_HELPER {t} pt__min_{n}({t} a, {t} b) {{ return a < b ? a : b; }}
PT_HELPER {t} pt__max_{n}({t} a, {t} b) {{ return a > b ? a : b; }}
"""

_POWI = """\
PT_HELPER {t} pt__powi_{name}({t} x, int64_t n) {{
  if (n == 0) return ({t})1;
  {t} r = x;
  for (int64_t k = 1; k < (n < 0 ? -n : n); k++) r = {rnd}(r * x);
  return n < 0 ? {rnd}(({t})1 / r) : r;
}}
"""


def prelude() -> str:
    """All helpers, as C text."""
    parts = [HEADER]
    for t in ("bool", "int8_t", "uint8_t", "int32_t", "int64_t", "float", "double"):
        parts.append(_MINMAX.format(t=t, n=t))
    rounding = {"float16": "pt__round_f16", "bfloat16": "pt__round_bf16"}
    for name, t in (("int8", "int8_t"), ("uint8", "uint8_t"), ("int32", "int32_t"), ("int64", "int64_t"), ("float16", "float"),
                    ("bfloat16", "float"), ("float32", "float"), ("float64", "double")):
        rnd = rounding.get(name, f"({t})")
        parts.append(_POWI.format(t=t, name=name, rnd=rnd))
    return "\n".join(parts)
