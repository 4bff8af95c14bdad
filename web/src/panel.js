// The panel under the player: cards (a label, a value and a detail line each) and a graph of
// a rate over the last 30 s. Both views of the page (the stamped test track, the player) fill
// them with their own figures; a card whose value is not known is hidden, never shown as a
// placeholder. What is on screen is also in window.watch.panel, for tests/browser.rs.

// The graph: the last 30 s, a value every 250 ms (less often in a hidden tab, whose timers the
// browser slows: each value is plotted at the time it was taken).
export const STEP_MS = 250;
const SPAN_MS = 30_000;

// Cards in `container`, one per spec ({id, label}), hidden until they get a value.
export function makeCards(container, specs, panel) {
  const cards = {};
  container.replaceChildren(
    ...specs.map(({ id, label }) => {
      const card = document.createElement("div");
      card.className = "card";
      card.hidden = true;
      card.dataset.card = id;
      const name = document.createElement("span");
      name.className = "label";
      name.textContent = label;
      const value = document.createElement("span");
      value.className = "value";
      const detail = document.createElement("span");
      detail.className = "detail";
      card.append(name, value, detail);
      cards[id] = { card, value, detail };
      return card;
    }),
  );
  panel.cards = {};
  // Shows `value` (and `detail`) on card `id`; `null` hides it. `state` colours the value.
  return (id, value, detail = "", state = "") => {
    const c = cards[id];
    if (!c) return;
    if (value === null || value === undefined) {
      c.card.hidden = true;
      delete panel.cards[id];
      return;
    }
    c.card.hidden = false;
    if (c.value.textContent !== String(value)) c.value.textContent = String(value);
    if (c.detail.textContent !== detail) c.detail.textContent = detail;
    c.value.className = `value${state ? ` status-${state}` : ""}`;
    panel.cards[id] = { value: String(value), detail };
  };
}

// A rate graph on `canvas`: push one value every STEP_MS; draws the last 30 s.
export class RateGraph {
  constructor(canvas, label, unit, panel) {
    this.canvas = canvas;
    this.unit = unit;
    this.values = [];
    this.panel = panel;
    panel.graph = { label, last: null };
    const heading = document.getElementById("graph-label");
    if (heading) heading.textContent = label;
  }

  push(value, now = performance.now()) {
    this.values.push([now, value]);
    while (this.values.length > 0 && now - this.values[0][0] > SPAN_MS) this.values.shift();
    this.panel.graph.last = value;
    this.draw(now);
  }

  draw(now) {
    const canvas = this.canvas;
    const scale = window.devicePixelRatio || 1;
    const width = Math.max(1, Math.round(canvas.clientWidth * scale));
    const height = Math.max(1, Math.round(canvas.clientHeight * scale));
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    const ctx = canvas.getContext("2d");
    const top = Math.max(10, ...this.values.map(([, v]) => v)) * 1.2;
    const plot = height - 18 * scale;
    // The newest at the right edge, 30 s ago at the left.
    const x = (t) => ((t - (now - SPAN_MS)) / SPAN_MS) * width;
    const y = (v) => height - (v / top) * plot;
    ctx.clearRect(0, 0, width, height);
    ctx.strokeStyle = "#2c323b";
    ctx.lineWidth = scale;
    ctx.beginPath();
    ctx.moveTo(0, height - scale / 2);
    ctx.lineTo(width, height - scale / 2);
    ctx.stroke();
    if (this.values.length > 0) {
      const first = x(this.values[0][0]);
      ctx.beginPath();
      ctx.moveTo(first, height);
      for (const [t, v] of this.values) ctx.lineTo(x(t), y(v));
      ctx.lineTo(width, height);
      ctx.closePath();
      ctx.fillStyle = "rgba(79, 179, 255, 0.25)";
      ctx.fill();
      ctx.beginPath();
      this.values.forEach(([t, v], i) => (i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
      ctx.strokeStyle = "#4fb3ff";
      ctx.lineWidth = 2 * scale;
      ctx.stroke();
    }
    ctx.fillStyle = "#8b93a1";
    ctx.font = `${12 * scale}px system-ui, sans-serif`;
    ctx.fillText(`${Math.round(top)}${this.unit}`, 4 * scale, 12 * scale);
    const last = this.values.length > 0 ? this.values[this.values.length - 1][1] : 0;
    const label = `now ${Math.round(last)}${this.unit}`;
    ctx.fillText(label, width - ctx.measureText(label).width - 4 * scale, 12 * scale);
  }
}

// Events at performance.now() times, as a rate per second over the trailing second.
export class Arrivals {
  constructor() {
    this.times = [];
  }

  add(t = performance.now()) {
    this.times.push(t);
  }

  perSecond(now = performance.now()) {
    this.times = this.times.filter((t) => now - t < 1000);
    return this.times.length;
  }
}

// A growing counter sampled every STEP_MS, as a rate per second over the trailing second.
export class CounterRate {
  constructor() {
    this.samples = [];
  }

  sample(value, now = performance.now()) {
    this.samples.push([now, value]);
    while (this.samples.length > 2 && now - this.samples[1][0] >= 1000) this.samples.shift();
    const [t0, v0] = this.samples[0];
    return now > t0 ? ((value - v0) * 1000) / (now - t0) : 0;
  }
}
