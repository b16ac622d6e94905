// Small pure helpers the screens share.

export function percent(score: number): string {
  return `${(score * 100).toFixed(score >= 0.995 || score < 0.005 ? 0 : 1)}%`;
}

/** A score that may not have been computed (a head-decided validator's prompt): an em dash then. */
export function maybePercent(score: number | null | undefined): string {
  return score == null ? "—" : percent(score);
}

export function milliseconds(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

/** "1 h 02 min", "3 min 05 s", "42 s"; an em dash when unknown. */
export function duration(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  if (h > 0) return `${h} h ${String(m).padStart(2, "0")} min`;
  if (m > 0) return `${m} min ${String(rest).padStart(2, "0")} s`;
  return `${rest} s`;
}

export function bytes(n: number | null | undefined): string {
  if (n == null) return "—";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function time(millis: number): string {
  return new Date(millis).toLocaleString();
}

/** The time of day alone (a claim's expiry is within the day). */
export function clock(millis: number): string {
  return new Date(millis).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** Bar heights (0..1) for a histogram, scaled to its tallest bin. */
export function histogramHeights(bins: number[]): number[] {
  const tallest = Math.max(1, ...bins);
  return bins.map((b) => b / tallest);
}

/** How far a score sits from its threshold, as the review queue orders by. */
export function uncertainty(results: { score: number; threshold: number }[]): number {
  return Math.min(...results.map((r) => Math.abs(r.score - r.threshold)));
}
