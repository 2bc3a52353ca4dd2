/** The transport under Client: one request with retries of refused answers, timeouts,
 * escaped path segments, read-your-writes, and the errors of errors.ts. */

import { ApiError, hintFor, Unreachable } from "./errors.js";
import type { paths } from "./schema.js";

type Verb = "get" | "put" | "post" | "delete" | "patch";
type V1 = Extract<keyof paths, `/v1/${string}`>;

/** Every /v1 operation of the API as "METHOD /v1/path/{param}", from the generated schema. */
export type OpKey = {
  [P in V1]: { [M in Verb]: [NonNullable<paths[P][M]>] extends [never] ? never : `${Uppercase<M>} ${P}` }[Verb];
}[V1];

type OpOf<K extends OpKey> = K extends `${infer M extends Uppercase<Verb>} ${infer P extends V1}`
  ? NonNullable<paths[P][Lowercase<M>]>
  : never;
type Json<C> = C extends { content: { "application/json": infer J } } ? J : undefined;

/** The decoded JSON answer of an operation (undefined for 204 and file downloads). */
export type Answer<K extends OpKey> =
  OpOf<K> extends { responses: infer R } ? Json<R[Extract<keyof R, 200 | 201 | 202 | 204>]> : never;
/** The JSON request body of an operation. */
export type Body<K extends OpKey> =
  OpOf<K> extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;
/** The query parameters of an operation. */
export type Query<K extends OpKey> = OpOf<K> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** Per call: `signal` aborts it (the abort's reason is thrown as is); `timeoutMs` overrides
 * the client's (0: no timeout). */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ClientOptions {
  /** Each attempt's time limit in milliseconds (until the whole answer is read; a stream's
   * until its headers); Unreachable when it passes. 0: none. Default 30000. */
  timeoutMs?: number;
  /** How many times a request answered 429 (rate limited) or 503 (overloaded) is sent again
   * after the server's Retry-After (capped at maxRetryAfterMs). Both answers mean the request
   * was refused before it did anything, so any request may be resent. 0 turns it off. Default 3. */
  retries?: number;
  /** The longest wait a Retry-After may ask for, in milliseconds. Default 60000. */
  maxRetryAfterMs?: number;
  /** Aborts every call of this client (with each call's own signal, whichever comes first). */
  signal?: AbortSignal;
  /** Another fetch (a proxy agent, instrumentation); default the global fetch. */
  fetch?: typeof fetch;
}

export type QueryValue = string | number | boolean | null | undefined;

/** One request: a path under the base URL, its query (undefined and null values left out), and
 * a JSON body (`json`) or a raw one (`body`). */
export interface Call extends CallOptions {
  method: string;
  path: string;
  query?: Record<string, QueryValue>;
  json?: unknown;
  body?: Uint8Array | string | Blob | ReadableStream<Uint8Array>;
  headers?: Record<string, string>;
}

/** Answers refused before any work was done: safe to send again. */
export const REFUSED: readonly number[] = [429, 503];

/** One path segment, escaped so an id can never reach another path ('../other-agent', '?',
 * '#'); '.' and '..' are not ids at all. */
export function seg(value: string | number): string {
  const text = String(value);
  if (text === "." || text === "..") throw new TypeError(`'${text}' is not a valid id`);
  return encodeURIComponent(text);
}

/** The operation's path with each {parameter} replaced by its escaped value. */
export function fill(path: string, params: Record<string, string | number>): string {
  return path.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`missing path parameter ${name} for ${path}`);
    return seg(value);
  });
}

/** The server's Retry-After in milliseconds (capped), or one second. */
export function retryAfterMs(resp: Response, capMs: number): number {
  const seconds = Number(resp.headers.get("retry-after") ?? "1");
  return Number.isFinite(seconds) ? Math.min(capMs, Math.max(0, seconds * 1000)) : Math.min(capMs, 1000);
}

/** Wait `ms`, or reject with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = (): void => {
      signal?.removeEventListener("abort", stop);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const stop = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

function lsnValue(lsn: string): bigint | undefined {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn);
  return match ? (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`) : undefined;
}

/** One attempt's abort: the caller's signals and the timeout, whichever fires first. */
class Attempt {
  private readonly timeout = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  readonly signal: AbortSignal;

  constructor(
    timeoutMs: number,
    private readonly callers: AbortSignal[],
  ) {
    if (timeoutMs > 0) {
      this.timer = setTimeout(() => {
        this.timeout.abort(new DOMException(`no answer in ${timeoutMs} ms`, "TimeoutError"));
      }, timeoutMs);
    }
    this.signal = AbortSignal.any([this.timeout.signal, ...callers]);
  }

  get timedOut(): boolean {
    return this.timeout.signal.aborted && !this.callers.some((s) => s.aborted);
  }

  done(): void {
    clearTimeout(this.timer);
  }
}

export class Transport {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly maxRetryAfterMs: number;
  private readonly signal: AbortSignal | undefined;
  private readonly fetch: typeof fetch;
  private lsn = 0n; // the newest write's WAL position the server answered (replicas: read-your-writes)
  private lsnText = "";

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    const url = new URL(baseUrl); // a malformed URL throws here, naming it
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`the base URL must start with http:// or https:// (got ${baseUrl})`);
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.apiKey = apiKey;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retries = options.retries ?? 3;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
    this.signal = options.signal;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** The decoded JSON answer (undefined when empty), or ApiError/Unreachable. */
  async call(req: Call): Promise<unknown> {
    return this.exchange(req, async (resp) => {
      const text = await resp.text();
      return text ? (JSON.parse(text) as unknown) : undefined;
    });
  }

  /** The answer's bytes (a download), or ApiError/Unreachable. */
  async bytes(req: Call): Promise<Uint8Array> {
    return this.exchange(req, async (resp) => new Uint8Array(await resp.arrayBuffer()));
  }

  /** The answer's body as it arrives; the timeout covers the wait for its headers only. */
  async stream(req: Call): Promise<ReadableStream<Uint8Array>> {
    return this.exchange(req, (resp) => Promise.resolve(resp.body ?? new Blob([]).stream()), true);
  }

  private async exchange<T>(req: Call, read: (resp: Response) => Promise<T>, streaming = false): Promise<T> {
    const callers = [this.signal, req.signal].filter((s): s is AbortSignal => s !== undefined);
    const resendable = !(req.body instanceof ReadableStream); // a stream is consumed once
    for (let attempt = 0; ; attempt++) {
      const turn = new Attempt(req.timeoutMs ?? this.timeoutMs, callers);
      try {
        const resp = await this.reaching(turn, () => this.send(req, turn.signal));
        this.noteLsn(resp.headers.get("x-memworker-lsn"));
        if (REFUSED.includes(resp.status) && attempt < this.retries && resendable) {
          await resp.body?.cancel();
          turn.done();
          await sleep(retryAfterMs(resp, this.maxRetryAfterMs), AbortSignal.any(callers));
          continue;
        }
        if (resp.status >= 400) throw await this.reaching(turn, () => errorOf(resp));
        if (streaming) {
          turn.done();
          return await read(resp);
        }
        return await this.reaching(turn, () => read(resp));
      } finally {
        turn.done();
      }
    }
  }

  private send(req: Call, signal: AbortSignal): Promise<Response> {
    const url = new URL(this.baseUrl + req.path);
    for (const [name, value] of Object.entries(req.query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    const headers: Record<string, string> = { authorization: `Bearer ${this.apiKey}`, ...req.headers };
    if (this.lsnText) headers["x-memworker-lsn"] = this.lsnText;
    let body: Call["body"] | undefined = req.body;
    if (req.json !== undefined) {
      body = JSON.stringify(req.json);
      headers["content-type"] = "application/json";
    }
    const init: RequestInit & { duplex?: "half" } = { method: req.method, headers, body, signal };
    if (body instanceof ReadableStream) init.duplex = "half"; // a streamed upload
    return this.fetch(url, init);
  }

  /** Every transport failure (refused, unresolved, reset, timed out) as Unreachable, so a
   * caller handles one kind of error; a caller's own abort is thrown as its reason. */
  private async reaching<T>(turn: Attempt, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      if (error instanceof ApiError) throw error;
      if (turn.timedOut) {
        const hint = "the API did not answer in time: it may be overloaded; retry, or raise timeoutMs";
        throw new Unreachable(this.baseUrl, error, hint);
      }
      if (turn.signal.aborted) throw turn.signal.reason;
      throw new Unreachable(this.baseUrl, error, hintFor(error));
    }
  }

  /** A server with read replicas answers a write with its WAL position; sent back with
   * every later request, it makes a replica's read wait for that write (or go to the primary). */
  private noteLsn(lsn: string | null): void {
    const position = lsn ? lsnValue(lsn) : undefined;
    if (lsn && position !== undefined && position > this.lsn) {
      this.lsn = position;
      this.lsnText = lsn;
    }
  }
}

async function errorOf(resp: Response): Promise<ApiError> {
  const text = await resp.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the body
  }
  return new ApiError(resp.status, body);
}
