// The readings a validator's head made of a turn (the guard's `ReadingScore`), in words. A
// reading the console has no words for yet is shown by its name, so a new one needs no change
// here to appear.
import type { ReadingScore } from "../bindings/ReadingScore";
import { percent } from "./format";

const LABELS: Record<string, string> = {
  turn: "as written",
  in_context: "in context",
  quotes_elided: "quotes elided",
};

export function readingLabel(name: string): string {
  return LABELS[name] ?? name.replaceAll("_", " ");
}

/** What a reading that turned the decision did, for a validator that `passed` or failed. */
export function turnedNote(reading: ReadingScore, passed: boolean): string {
  if (reading.reading === "in_context" && !passed) return "caught in context";
  if (reading.reading === "quotes_elided" && passed) return "quote read as mentioned";
  return `${passed ? "cleared" : "caught"} by reading ${readingLabel(reading.reading)}`;
}

/** "as written 91% · quotes elided 4% (decided)": every reading beside the turn's own. */
export function readingsLine(readings: ReadingScore[]): string {
  return readings
    .map((r) => `${readingLabel(r.reading)} ${percent(r.score)}${r.decided ? " (decided)" : ""}`)
    .join(" · ");
}
