// A small W3C WebDriver client over fetch: enough to drive the app through tauri-driver.

const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";
export const Keys = { ctrl: "\uE009", enter: "\uE007", end: "\uE010", home: "\uE011", shift: "\uE008" };

export class Driver {
  constructor(base, session) {
    this.base = base;
    this.session = session;
  }

  static async start(base, application) {
    const res = await request(base, "POST", "/session", {
      capabilities: { alwaysMatch: { "tauri:options": { application } } },
    });
    return new Driver(base, res.sessionId);
  }

  cmd(method, path, body) {
    return request(this.base, method, `/session/${this.session}${path}`, body);
  }

  async find(css) {
    const el = await this.cmd("POST", "/element", { using: "css selector", value: css });
    return el[ELEMENT];
  }

  async findAll(css) {
    const els = await this.cmd("POST", "/elements", { using: "css selector", value: css });
    return els.map((e) => e[ELEMENT]);
  }

  /** Polls until `css` matches (and `accept`, given the element, holds). */
  async waitFor(css, { timeout = 30_000, accept } = {}) {
    const deadline = Date.now() + timeout;
    let last;
    for (;;) {
      try {
        const id = await this.find(css);
        if (!accept || (await accept(id))) return id;
      } catch (e) {
        last = e;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${css}: ${last ?? "condition not met"}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  click(id) {
    return this.cmd("POST", `/element/${id}/click`, {});
  }

  type(id, text) {
    return this.cmd("POST", `/element/${id}/value`, { text });
  }

  clear(id) {
    return this.cmd("POST", `/element/${id}/clear`, {});
  }

  text(id) {
    return this.cmd("GET", `/element/${id}/text`);
  }

  attribute(id, name) {
    return this.cmd("GET", `/element/${id}/attribute/${name}`);
  }

  execute(script, args = []) {
    return this.cmd("POST", "/execute/sync", { script, args });
  }

  /** Key presses on whatever has focus: each entry a key, or [modifier, key] held together. */
  async keys(sequence) {
    const actions = [];
    for (const step of sequence) {
      const chord = Array.isArray(step) ? step : [step];
      for (const k of chord) actions.push({ type: "keyDown", value: k });
      for (const k of [...chord].reverse()) actions.push({ type: "keyUp", value: k });
    }
    await this.cmd("POST", "/actions", { actions: [{ type: "key", id: "keyboard", actions }] });
    await this.cmd("DELETE", "/actions");
  }

  async typeKeys(text) {
    await this.keys([...text]);
  }

  async screenshot() {
    return Buffer.from(await this.cmd("GET", "/screenshot"), "base64");
  }

  quit() {
    return this.cmd("DELETE", "");
  }
}

async function request(base, method, path, body) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json().catch(() => ({}));
  if (!res.ok) {
    const v = json.value ?? {};
    throw new Error(`${method} ${path}: ${res.status} ${v.error ?? ""} ${v.message ?? ""}`);
  }
  return json.value;
}
