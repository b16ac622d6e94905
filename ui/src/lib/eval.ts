// The Eval screen's arithmetic: precision and recall at a threshold, recomputed in the window
// from a run's stored scores as the slider moves. Same rules as the Rust metrics (aegis-eval):
// flagged means score >= threshold; an undefined ratio is null, never a made-up zero.

export type AtThreshold = {
  threshold: number;
  tp: number;
  fp: number;
  tn: number;
  fn: number;
  precision: number | null;
  recall: number | null;
  f1: number | null;
};

function ratio(numerator: number, denominator: number): number | null {
  return denominator > 0 ? numerator / denominator : null;
}

export function atThreshold(scores: number[], labels: boolean[], threshold: number): AtThreshold {
  let tp = 0, fp = 0, tn = 0, fn = 0;
  scores.forEach((score, i) => {
    const flagged = score >= threshold;
    if (labels[i]) flagged ? tp++ : fn++;
    else flagged ? fp++ : tn++;
  });
  return {
    threshold,
    tp, fp, tn, fn,
    precision: ratio(tp, tp + fp),
    recall: ratio(tp, tp + fn),
    f1: ratio(2 * tp, 2 * tp + fp + fn),
  };
}

/** The same, per language, for the rows whose language is `lang`. */
export function atThresholdFor(
  points: { scores: number[]; labels: boolean[]; langs: string[] },
  lang: string,
  threshold: number,
): AtThreshold {
  const keep = points.langs.map((l) => l === lang);
  return atThreshold(
    points.scores.filter((_, i) => keep[i]),
    points.labels.filter((_, i) => keep[i]),
    threshold,
  );
}

export function fixed(value: number | null | undefined, digits = 3): string {
  return value == null ? "–" : value.toFixed(digits);
}

/** Cohen's kappa as read aloud: the figure and the band Landis and Koch named for it. */
export function kappaText(kappa: number | null | undefined): string {
  if (kappa == null) return "–";
  const band =
    kappa < 0 ? "worse than chance" : kappa <= 0.2 ? "slight" : kappa <= 0.4 ? "fair" : kappa <= 0.6 ? "moderate" : kappa <= 0.8 ? "substantial" : "almost perfect";
  return `${kappa.toFixed(2)} ${band}`;
}

/** An SVG polyline's points for a curve in the unit square, drawn in a size×size box. */
export function polyline(points: [number, number][], size: number): string {
  return points
    .map(([x, y]) => `${(x * size).toFixed(1)},${((1 - y) * size).toFixed(1)}`)
    .join(" ");
}
