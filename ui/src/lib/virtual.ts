// Which rows of a long fixed-height list to render: only those in view, plus a margin.

export interface Window {
  start: number;
  end: number;
  offset: number;
}

export function visibleRows(
  scrollTop: number,
  viewport: number,
  rowHeight: number,
  total: number,
  overscan = 8,
): Window {
  const first = Math.floor(scrollTop / rowHeight);
  const start = Math.max(0, first - overscan);
  const end = Math.min(total, first + Math.ceil(viewport / rowHeight) + overscan);
  return { start, end, offset: start * rowHeight };
}
