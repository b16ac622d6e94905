// State every screen reads: the model's status, kept current by the console's events.
import type { ModelState } from "../bindings/ModelState";

export const model = $state<{ current: ModelState }>({
  current: {
    status: "loading",
    model: "",
    device: "",
    weights: "",
    synthetic: false,
    message: "starting",
    download: null,
    load_ms: null,
  },
});

/** Bumped when templates change on disk, so screens showing them reload. */
export const templatesVersion = $state({ value: 0 });
