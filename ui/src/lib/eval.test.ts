import { describe, expect, it } from "vitest";
import { atThreshold, atThresholdFor, fixed, kappaText, polyline } from "./eval";

// The hand-worked fixture of crates/aegis-eval/tests/fixtures/metrics.md (spam).
const scores = [0.9, 0.8, 0.7, 0.7, 0.4, 0.2, 0.1];
const labels = [true, false, true, false, true, false, false];
const langs = ["en", "en", "en", "en", "id", "id", "id"];

describe("metrics at a threshold", () => {
  it("match the Rust metrics on the hand-worked fixture, ties included", () => {
    const m = atThreshold(scores, labels, 0.5);
    expect([m.tp, m.fp, m.tn, m.fn]).toEqual([2, 2, 2, 1]);
    expect(m.precision).toBe(0.5);
    expect(m.recall).toBeCloseTo(2 / 3, 12);
    expect(m.f1).toBeCloseTo(4 / 7, 12);
    expect(atThreshold(scores, labels, 0.4).f1).toBeCloseTo(0.75, 12);
    // Inclusive, like the guard: both tied 0.7 rows flip together.
    expect(atThreshold(scores, labels, 0.7).fp).toBe(2);
  });

  it("say null where a ratio is undefined", () => {
    const id = atThresholdFor({ scores, labels, langs }, "id", 0.5);
    expect(id.precision).toBeNull();
    expect(id.recall).toBe(0);
    const allNegative = atThreshold([0.3, 0.1], [false, false], 0.5);
    expect([allNegative.precision, allNegative.recall, allNegative.f1]).toEqual([null, null, null]);
    expect(fixed(null)).toBe("–");
  });

  it("draws curves in SVG coordinates", () => {
    expect(polyline([[0, 0], [1, 1]], 100)).toBe("0.0,100.0 100.0,0.0");
  });
});

describe("kappaText", () => {
  it("names the band beside the figure, and nothing for an undefined kappa", () => {
    expect(kappaText(null)).toBe("–");
    expect(kappaText(0.4)).toBe("0.40 fair");
    expect(kappaText(0.85)).toBe("0.85 almost perfect");
    expect(kappaText(-0.1)).toBe("-0.10 worse than chance");
  });
});
