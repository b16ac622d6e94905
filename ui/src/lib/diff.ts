// Line diffs between template versions, for the version history.
import { diffLines } from "diff";

export interface DiffLine {
  kind: "same" | "added" | "removed";
  text: string;
}

export function lineDiff(before: string, after: string): DiffLine[] {
  const lines: DiffLine[] = [];
  for (const part of diffLines(before, after)) {
    const kind = part.added ? "added" : part.removed ? "removed" : "same";
    const texts = part.value.replace(/\n$/, "").split("\n");
    for (const text of texts) lines.push({ kind, text });
  }
  return lines;
}
