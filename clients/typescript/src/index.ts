/** memworker's TypeScript client: every /v1 operation of the API as a method of Client, the
 * same names as the Python SDK (memworker/sdk.py) in camelCase. Types come from the API's
 * OpenAPI document (schema.ts, generated: `npm run openapi`). */

import { ApiError } from "./errors.js";
import {
  type Answer,
  type Body,
  type CallOptions,
  type ClientOptions,
  fill,
  type OpKey,
  type Query,
  type Call,
  sleep,
  Transport,
} from "./http.js";
import type { components } from "./schema.js";

export { ApiError, Unreachable } from "./errors.js";
export { REFUSED, retryAfterMs, seg } from "./http.js";
export type { Answer, Body, Call, CallOptions, ClientOptions, OpKey, Query } from "./http.js";
export type { components, paths } from "./schema.js";

/** The API's named schemas (request bodies and answers): Schemas["MemoryOut"], ... */
export type Schemas = components["schemas"];
type Fields<K extends OpKey, Given extends string> = Partial<Omit<Body<K>, Given>>;
type ImportSource = Uint8Array | string | Blob | ReadableStream<Uint8Array>;

const DONE_EPISODE = ["stored", "dead"]; // done, one way or the other
const DONE_RUN = ["done", "skipped", "failed"];

/** `subject=`: the subject a caller acts for on a session's routes. A session that is not
 * that subject's is then refused with a 403; none: the key reaches every session it may. */
export interface Acting extends CallOptions {
  subject?: string;
}

/** A wait (waitForEpisode, waitForRun) ran out before the work was done. */
export class WaitTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WaitTimeout";
  }
}

/** The JSON objects of an NDJSON stream (an export), one per line, as they arrive. */
export async function* ndjson(stream: ReadableStream<Uint8Array>): AsyncGenerator<Record<string, unknown>> {
  let rest = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    const lines = (rest + text).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) if (line.trim()) yield JSON.parse(line) as Record<string, unknown>;
  }
  if (rest.trim()) yield JSON.parse(rest) as Record<string, unknown>;
}

/** const c = new Client("http://127.0.0.1:8420", apiKey); await c.addEpisode("bot", "...") */
export class Client {
  private readonly http: Transport;

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    this.http = new Transport(baseUrl, apiKey, options);
  }

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /** One call to any route (a path under the base URL), with the same retries and errors as
   * the methods: the decoded JSON answer, or undefined. */
  request(method: string, path: string, req: Omit<Call, "method" | "path"> = {}): Promise<unknown> {
    return this.http.call({ ...req, method, path });
  }

  /** The operation's call (an id that cannot be a path segment rejects, sending nothing). */
  private async op<K extends OpKey>(
    key: K,
    params: Record<string, string | number>,
    req: Omit<Call, "method" | "path"> = {},
  ): Promise<Answer<K>> {
    const [method, path] = key.split(" ", 2) as [string, string];
    return (await this.http.call({ ...req, method, path: fill(path, params) })) as Answer<K>;
  }

  private pathOf<K extends OpKey>(key: K, params: Record<string, string | number>): string {
    return fill(key.slice(key.indexOf(" ") + 1), params);
  }

  // episodes
  addEpisode(
    agentId: string,
    content: string | null,
    fields: Fields<"POST /v1/agents/{agent_id}/episodes", "content"> = {},
    opts?: CallOptions,
  ) {
    const json = content === null ? fields : { content, ...fields };
    return this.op("POST /v1/agents/{agent_id}/episodes", { agent_id: agentId }, { ...opts, json });
  }

  async addEpisodes(agentId: string, episodes: Schemas["EpisodeIn"][], opts?: CallOptions) {
    const json = { episodes };
    return (await this.op("POST /v1/agents/{agent_id}/episodes/batch", { agent_id: agentId }, { ...opts, json }))
      .episodes;
  }

  getEpisode(agentId: string, episodeId: string, opts?: CallOptions) {
    const params = { agent_id: agentId, episode_id: episodeId };
    return this.op("GET /v1/agents/{agent_id}/episodes/{episode_id}", params, opts);
  }

  /** Poll until the episode is stored or dead; WaitTimeout after `waitMs` (default 60 s). */
  async waitForEpisode(agentId: string, episodeId: string, opts: CallOptions & { waitMs?: number } = {}) {
    const deadline = Date.now() + (opts.waitMs ?? 60_000);
    for (;;) {
      const ep = await this.getEpisode(agentId, episodeId, opts);
      if (DONE_EPISODE.includes(ep.status)) return ep;
      if (Date.now() > deadline) throw new WaitTimeout(`episode ${episodeId} still ${ep.status} after waiting`);
      await sleep(100, opts.signal);
    }
  }

  replayEpisode(agentId: string, episodeId: string, opts?: CallOptions) {
    const params = { agent_id: agentId, episode_id: episodeId };
    return this.op("POST /v1/agents/{agent_id}/episodes/{episode_id}/replay", params, opts);
  }

  async listEpisodes(query: Query<"GET /v1/episodes"> = {}, opts?: CallOptions) {
    return (await this.op("GET /v1/episodes", {}, { ...opts, query: { limit: 100, ...query } })).episodes;
  }

  usage(agentId?: string, opts?: CallOptions) {
    return this.op("GET /v1/usage", {}, { ...opts, query: { agent_id: agentId } });
  }

  // memories
  addMemory(
    agentId: string,
    text: string,
    fields: Fields<"POST /v1/agents/{agent_id}/memories", "text"> = {},
    opts?: CallOptions,
  ) {
    const json = { text, ...fields };
    return this.op("POST /v1/agents/{agent_id}/memories", { agent_id: agentId }, { ...opts, json });
  }

  async addMemories(agentId: string, memories: Schemas["MemoryIn"][], opts?: CallOptions) {
    const json = { memories };
    return (await this.op("POST /v1/agents/{agent_id}/memories/batch", { agent_id: agentId }, { ...opts, json }))
      .memories;
  }

  getMemory(agentId: string, memoryId: string, opts?: CallOptions) {
    const params = { agent_id: agentId, memory_id: memoryId };
    return this.op("GET /v1/agents/{agent_id}/memories/{memory_id}", params, opts);
  }

  updateMemory(
    agentId: string,
    memoryId: string,
    changes: Body<"PATCH /v1/agents/{agent_id}/memories/{memory_id}">,
    opts?: CallOptions,
  ) {
    const params = { agent_id: agentId, memory_id: memoryId };
    return this.op("PATCH /v1/agents/{agent_id}/memories/{memory_id}", params, { ...opts, json: changes });
  }

  async deleteMemory(agentId: string, memoryId: string, opts?: CallOptions): Promise<void> {
    const params = { agent_id: agentId, memory_id: memoryId };
    await this.op("DELETE /v1/agents/{agent_id}/memories/{memory_id}", params, opts);
  }

  /** A page: {memories, next_cursor} (null on the last page). metadata: only memories whose
   * metadata contains this object; subject: only that subject's memories. */
  listMemories(
    agentId: string,
    filters: Omit<Query<"GET /v1/agents/{agent_id}/memories">, "metadata"> & {
      metadata?: Record<string, unknown>;
    } = {},
    opts?: CallOptions,
  ) {
    const { metadata, ...rest } = filters;
    const query = { limit: 50, ...rest, metadata: metadata === undefined ? undefined : JSON.stringify(metadata) };
    return this.op("GET /v1/agents/{agent_id}/memories", { agent_id: agentId }, { ...opts, query });
  }

  /** Every memory matching the filters, page after page. */
  async *iterMemories(
    agentId: string,
    filters: Parameters<Client["listMemories"]>[1] = {},
    opts?: CallOptions,
  ): AsyncGenerator<Schemas["MemoryOut"]> {
    let cursor: string | null | undefined = filters?.cursor;
    do {
      const page = await this.listMemories(agentId, { ...filters, cursor }, opts);
      yield* page.memories;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** {memories, took_ms}; options: tiers, kinds, since, until, metadata, explain, subject,
   * include_superseded (docs/recall.md). */
  recall(
    agentId: string,
    query: string,
    k = 5,
    options: Fields<"POST /v1/agents/{agent_id}/recall", "query" | "k"> = {},
    opts?: CallOptions,
  ) {
    const json = { query, k, ...options };
    return this.op("POST /v1/agents/{agent_id}/recall", { agent_id: agentId }, { ...opts, json });
  }

  /** One ranked list over several agents' memories (each hit names its agent_id). */
  recallAgents(
    agents: string[],
    query: string,
    k = 5,
    options: Fields<"POST /v1/recall", "agents" | "query" | "k"> = {},
    opts?: CallOptions,
  ) {
    return this.op("POST /v1/recall", {}, { ...opts, json: { agents, query, k, ...options } });
  }

  // sleep (consolidation)
  /** Queue one consolidation pass; returns its run id. */
  async consolidate(agentId: string, opts?: CallOptions): Promise<string> {
    return (await this.op("POST /v1/agents/{agent_id}/consolidate", { agent_id: agentId }, opts)).run_id;
  }

  async consolidationRuns(agentId: string, limit = 20, opts?: CallOptions) {
    const req = { ...opts, query: { limit } };
    return (await this.op("GET /v1/agents/{agent_id}/consolidation/runs", { agent_id: agentId }, req)).runs;
  }

  consolidationStatus(agentId: string, opts?: CallOptions) {
    return this.op("GET /v1/agents/{agent_id}/consolidation", { agent_id: agentId }, opts);
  }

  /** Poll until the run is done, skipped or failed; WaitTimeout after `waitMs` (default 60 s). */
  async waitForRun(agentId: string, runId: string, opts: CallOptions & { waitMs?: number } = {}) {
    const deadline = Date.now() + (opts.waitMs ?? 60_000);
    for (;;) {
      const run = (await this.consolidationRuns(agentId, 200, opts)).find((r) => r.run_id === runId);
      if (run && DONE_RUN.includes(run.status)) return run;
      if (Date.now() > deadline) throw new WaitTimeout(`consolidation run ${runId} still ${run?.status} after waiting`);
      await sleep(200, opts.signal);
    }
  }

  /** The agent's profile, or with subject that subject's. */
  profile(agentId: string, query: Query<"GET /v1/agents/{agent_id}/profile"> = {}, opts?: CallOptions) {
    return this.op("GET /v1/agents/{agent_id}/profile", { agent_id: agentId }, { ...opts, query });
  }

  // lifecycle governance
  promote(agentId: string, memoryId: string, tier: string, reason: string, opts?: CallOptions) {
    const params = { agent_id: agentId, memory_id: memoryId };
    const json = { tier, reason };
    return this.op("POST /v1/agents/{agent_id}/memories/{memory_id}/promote", params, { ...opts, json });
  }

  history(agentId: string, memoryId: string, opts?: CallOptions) {
    const params = { agent_id: agentId, memory_id: memoryId };
    return this.op("GET /v1/agents/{agent_id}/memories/{memory_id}/history", params, opts);
  }

  async reviews(agentId: string, query: Query<"GET /v1/agents/{agent_id}/review"> = {}, opts?: CallOptions) {
    const req = { ...opts, query: { status: "open", limit: 100, ...query } };
    return (await this.op("GET /v1/agents/{agent_id}/review", { agent_id: agentId }, req)).reviews;
  }

  /** keep: 'both', or the id of the memory to keep (the other is superseded by it). */
  resolveReview(agentId: string, reviewId: string, keep: string, reason = "", opts?: CallOptions) {
    const params = { agent_id: agentId, review_id: reviewId };
    const json = { keep, reason };
    return this.op("POST /v1/agents/{agent_id}/review/{review_id}/resolve", params, { ...opts, json });
  }

  /** Exactly one of provenance, memory_ids, session_id, before; returns the receipt. */
  forget(agentId: string, selector: Body<"POST /v1/agents/{agent_id}/forget">, opts?: CallOptions) {
    return this.op("POST /v1/agents/{agent_id}/forget", { agent_id: agentId }, { ...opts, json: selector });
  }

  // shared pools (a tenant's memories its agents read by policy: pools_read, pools_write)
  async pools(opts?: CallOptions) {
    return (await this.op("GET /v1/pools", {}, opts)).pools;
  }

  addPoolMemory(
    pool: string,
    text: string,
    fields: Fields<"POST /v1/pools/{pool}/memories", "text"> = {},
    opts?: CallOptions,
  ) {
    return this.op("POST /v1/pools/{pool}/memories", { pool }, { ...opts, json: { text, ...fields } });
  }

  async addPoolMemories(pool: string, memories: Schemas["MemoryIn"][], opts?: CallOptions) {
    return (await this.op("POST /v1/pools/{pool}/memories/batch", { pool }, { ...opts, json: { memories } })).memories;
  }

  /** A page of the pool's memories: {memories, next_cursor}. */
  poolMemories(pool: string, query: Query<"GET /v1/pools/{pool}/memories"> = {}, opts?: CallOptions) {
    return this.op("GET /v1/pools/{pool}/memories", { pool }, { ...opts, query: { limit: 50, ...query } });
  }

  async deletePoolMemory(pool: string, memoryId: string, opts?: CallOptions): Promise<void> {
    await this.op("DELETE /v1/pools/{pool}/memories/{memory_id}", { pool, memory_id: memoryId }, opts);
  }

  /** Copy the agent's memory into a pool its policy may write. */
  shareMemory(agentId: string, memoryId: string, pool: string, opts?: CallOptions) {
    const params = { agent_id: agentId, memory_id: memoryId };
    return this.op("POST /v1/agents/{agent_id}/memories/{memory_id}/share", params, { ...opts, json: { pool } });
  }

  /** What sleep proposed to the pool: status open (default), approved, rejected or all. */
  async poolProposals(pool: string, query: Query<"GET /v1/pools/{pool}/proposals"> = {}, opts?: CallOptions) {
    const req = { ...opts, query: { status: "open", limit: 100, ...query } };
    return (await this.op("GET /v1/pools/{pool}/proposals", { pool }, req)).proposals;
  }

  approvePoolProposal(pool: string, proposalId: string, reason = "", opts?: CallOptions) {
    const params = { pool, proposal_id: proposalId };
    return this.op("POST /v1/pools/{pool}/proposals/{proposal_id}/approve", params, { ...opts, json: { reason } });
  }

  rejectPoolProposal(pool: string, proposalId: string, reason = "", opts?: CallOptions) {
    const params = { pool, proposal_id: proposalId };
    return this.op("POST /v1/pools/{pool}/proposals/{proposal_id}/reject", params, { ...opts, json: { reason } });
  }

  /** {overrides, effective} of an agent, or (no agent) of the tenant's defaults. */
  policy(agentId?: string, opts?: CallOptions) {
    return agentId === undefined
      ? this.op("GET /v1/policy", {}, opts)
      : this.op("GET /v1/agents/{agent_id}/policy", { agent_id: agentId }, opts);
  }

  /** Replace the overrides of an agent, or (no agent) the tenant's defaults. */
  setPolicy(overrides: Record<string, unknown>, agentId?: string, opts?: CallOptions) {
    const req = { ...opts, json: overrides };
    return agentId === undefined
      ? this.op("PUT /v1/policy", {}, req)
      : this.op("PUT /v1/agents/{agent_id}/policy", { agent_id: agentId }, req);
  }

  runRetention(agentId: string, opts?: CallOptions) {
    return this.op("POST /v1/agents/{agent_id}/retention/run", { agent_id: agentId }, opts);
  }

  async retentionRuns(agentId: string, limit = 20, opts?: CallOptions) {
    const req = { ...opts, query: { limit } };
    return (await this.op("GET /v1/agents/{agent_id}/retention", { agent_id: agentId }, req)).runs;
  }

  // sessions: working memory, plans, runtime context, archives
  /** Open a session (an existing session_id returns it unchanged, created false); subject:
   * whom the session is with, and the subject the caller acts for. */
  createSession(agentId: string, fields: Body<"POST /v1/agents/{agent_id}/sessions"> = {}, opts?: CallOptions) {
    return this.op("POST /v1/agents/{agent_id}/sessions", { agent_id: agentId }, { ...opts, json: fields });
  }

  async sessions(agentId: string, query: Query<"GET /v1/agents/{agent_id}/sessions"> = {}, opts?: CallOptions) {
    const req = { ...opts, query: { limit: 50, ...query } };
    return (await this.op("GET /v1/agents/{agent_id}/sessions", { agent_id: agentId }, req)).sessions;
  }

  private acting({ subject, ...opts }: Acting = {}): Omit<Call, "method" | "path"> {
    return { ...opts, query: { subject } };
  }

  session(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    return this.op("GET /v1/agents/{agent_id}/sessions/{session_id}", params, this.acting(opts));
  }

  working(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    return this.op("GET /v1/agents/{agent_id}/sessions/{session_id}/working", params, this.acting(opts));
  }

  /** changes: goal, intent (null clears), add [{kind, text | memory_id}], remove [ids], touch
   * [ids], expected_revision. */
  updateWorking(
    agentId: string,
    sessionId: string,
    changes: Body<"PATCH /v1/agents/{agent_id}/sessions/{session_id}/working">,
    opts?: Acting,
  ) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = { ...this.acting(opts), json: changes };
    return this.op("PATCH /v1/agents/{agent_id}/sessions/{session_id}/working", params, req);
  }

  /** milestones: [{id?, title, steps: [{id?, title, status?, progress?}]}]. */
  setPlan(agentId: string, sessionId: string, milestones: Schemas["MilestoneIn"][], title?: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = { ...this.acting(opts), json: title ? { milestones, title } : { milestones } };
    return this.op("PUT /v1/agents/{agent_id}/sessions/{session_id}/plan", params, req);
  }

  /** The plan, its milestones' status and progress, and resume (where to pick up). */
  plan(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    return this.op("GET /v1/agents/{agent_id}/sessions/{session_id}/plan", params, this.acting(opts));
  }

  /** changes: status, progress (0-100), output, note, expected_revision. */
  updateStep(
    agentId: string,
    sessionId: string,
    stepId: string,
    changes: Body<"PATCH /v1/agents/{agent_id}/sessions/{session_id}/plan/steps/{step_id}">,
    opts?: Acting,
  ) {
    const params = { agent_id: agentId, session_id: sessionId, step_id: stepId };
    const req = { ...this.acting(opts), json: changes };
    return this.op("PATCH /v1/agents/{agent_id}/sessions/{session_id}/plan/steps/{step_id}", params, req);
  }

  /** The runtime context; options: session_id, max_tokens, k, context_used (0..1) or
   * used_tokens and window_tokens, subject. */
  context(
    agentId: string,
    query: string,
    options: Fields<"POST /v1/agents/{agent_id}/context", "query"> = {},
    opts?: CallOptions,
  ) {
    const json = { query, ...options };
    return this.op("POST /v1/agents/{agent_id}/context", { agent_id: agentId }, { ...opts, json });
  }

  /** usage: context_used (0..1), or used_tokens with window_tokens; none: the estimate. */
  reportUsage(
    agentId: string,
    sessionId: string,
    usage: Body<"POST /v1/agents/{agent_id}/sessions/{session_id}/usage"> = {},
    opts?: Acting,
  ) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = { ...this.acting(opts), json: usage };
    return this.op("POST /v1/agents/{agent_id}/sessions/{session_id}/usage", params, req);
  }

  async contextCalls(agentId: string, sessionId: string, limit = 50, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = this.acting(opts);
    req.query = { ...req.query, limit };
    return (await this.op("GET /v1/agents/{agent_id}/sessions/{session_id}/context_calls", params, req)).context_calls;
  }

  /** Append items (JSON objects, kept as given) to the session's raw log, after its last one;
   * the positions they took. Never recalled or distilled; an archived session is a 409. */
  async addSessionItems(agentId: string, sessionId: string, items: Record<string, unknown>[], opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = { ...this.acting(opts), json: { items } };
    return (await this.op("POST /v1/agents/{agent_id}/sessions/{session_id}/items", params, req)).positions;
  }

  /** The session's items ({position, item, created_at}), oldest first: the last `limit`, or all. */
  async sessionItems(agentId: string, sessionId: string, limit?: number, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = this.acting(opts);
    req.query = { ...req.query, limit };
    return (await this.op("GET /v1/agents/{agent_id}/sessions/{session_id}/items", params, req)).items;
  }

  /** Delete the session's last item and return it; null when the session has none. */
  async popSessionItem(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    const out = await this.op(
      "DELETE /v1/agents/{agent_id}/sessions/{session_id}/items/last",
      params,
      this.acting(opts),
    );
    return out.item === null ? null : out;
  }

  /** Delete every item of the session; how many went. */
  async clearSessionItems(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    return (await this.op("DELETE /v1/agents/{agent_id}/sessions/{session_id}/items", params, this.acting(opts)))
      .deleted;
  }

  archiveSession(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    return this.op("POST /v1/agents/{agent_id}/sessions/{session_id}/archive", params, this.acting(opts));
  }

  restoreSession(agentId: string, sessionId: string, version?: number, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    const req = { ...this.acting(opts), json: version ? { version } : {} };
    return this.op("POST /v1/agents/{agent_id}/sessions/{session_id}/restore", params, req);
  }

  async archives(agentId: string, sessionId: string, opts?: Acting) {
    const params = { agent_id: agentId, session_id: sessionId };
    return (await this.op("GET /v1/agents/{agent_id}/sessions/{session_id}/archives", params, this.acting(opts)))
      .archives;
  }

  /** The archive as stored: gzip-compressed JSONL bytes. */
  async downloadArchive(agentId: string, sessionId: string, version: number, opts?: Acting): Promise<Uint8Array> {
    const params = { agent_id: agentId, session_id: sessionId, version };
    const path = this.pathOf("GET /v1/agents/{agent_id}/sessions/{session_id}/archives/{version}", params);
    return this.http.bytes({ ...this.acting(opts), method: "GET", path });
  }

  /** The archive's JSONL lines, decompressed and parsed. */
  async readArchive(agentId: string, sessionId: string, version: number, opts?: Acting) {
    const raw = await this.downloadArchive(agentId, sessionId, version, opts);
    const text = await new Response(new Blob([raw]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
    return text
      .split("\n")
      .filter((line) => line)
      .map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  // export and import (docs/export.md)
  /** The agent's whole export (NDJSON) in memory; exportChunks streams a large one. */
  async downloadExport(agentId: string, embeddings = false, opts?: CallOptions): Promise<Uint8Array> {
    const path = this.pathOf("GET /v1/agents/{agent_id}/export", { agent_id: agentId });
    return this.http.bytes({ ...opts, method: "GET", path, query: { embeddings } });
  }

  /** The agent's export (NDJSON) as it arrives (`ndjson(stream)` parses its lines). */
  async exportChunks(agentId: string, embeddings = false, opts?: CallOptions): Promise<ReadableStream<Uint8Array>> {
    const path = this.pathOf("GET /v1/agents/{agent_id}/export", { agent_id: agentId });
    return this.http.stream({ ...opts, method: "GET", path, query: { embeddings } });
  }

  /** One subject's data across the tenant's agents (NDJSON), in memory. */
  downloadSubjectExport(subject: string, embeddings = false, opts?: CallOptions): Promise<Uint8Array> {
    return this.http.bytes({
      ...opts,
      method: "GET",
      path: this.pathOf("GET /v1/export", {}),
      query: { subject, embeddings },
    });
  }

  subjectExportChunks(subject: string, embeddings = false, opts?: CallOptions): Promise<ReadableStream<Uint8Array>> {
    return this.http.stream({
      ...opts,
      method: "GET",
      path: this.pathOf("GET /v1/export", {}),
      query: { subject, embeddings },
    });
  }

  /** Import a file: a memworker export, a JSONL of {"text": ...} lines or LangGraph items, as
   * bytes, a string, a Blob (node: `await fs.openAsBlob(path)`, read from disk as it is sent)
   * or a stream (sent once: not retried). ApiError 422 names a bad line (nothing written). */
  importFile(agentId: string, source: ImportSource, format = "auto", opts?: CallOptions) {
    const req = {
      timeoutMs: 0, // a restore of a large file takes as long as it takes
      ...opts,
      body: source,
      query: { format },
      headers: { "content-type": "application/x-ndjson" },
    };
    return this.op("POST /v1/agents/{agent_id}/import", { agent_id: agentId }, req);
  }

  // webhooks
  /** Register a webhook for pre_turn, post_turn and/or archive; the answer's secret is shown once. */
  addWebhook(
    url: string,
    events: string[],
    fields: Fields<"POST /v1/webhooks", "url" | "events"> = {},
    opts?: CallOptions,
  ) {
    return this.op("POST /v1/webhooks", {}, { ...opts, json: { url, events, ...fields } });
  }

  async webhooks(opts?: CallOptions) {
    return (await this.op("GET /v1/webhooks", {}, opts)).webhooks;
  }

  async deleteWebhook(webhookId: string, opts?: CallOptions): Promise<void> {
    await this.op("DELETE /v1/webhooks/{webhook_id}", { webhook_id: webhookId }, opts);
  }

  async webhookDeliveries(webhookId: string, limit = 50, opts?: CallOptions) {
    const req = { ...opts, query: { limit } };
    return (await this.op("GET /v1/webhooks/{webhook_id}/deliveries", { webhook_id: webhookId }, req)).deliveries;
  }

  // administration within a tenant: agents, subject requests, keys
  /** A page of the tenant's agents this key reaches: {agents, next_cursor}. */
  agents(query: Query<"GET /v1/agents"> = {}, opts?: CallOptions) {
    return this.op("GET /v1/agents", {}, { ...opts, query: { limit: 50, ...query } });
  }

  /** Erase the agent and everything of it; the receipt. */
  eraseAgent(agentId: string, opts?: CallOptions) {
    return this.op("DELETE /v1/agents/{agent_id}", { agent_id: agentId }, opts);
  }

  /** A page of the subjects the agent holds, with counts: {subjects, next_cursor}. */
  agentSubjects(agentId: string, query: Query<"GET /v1/agents/{agent_id}/subjects"> = {}, opts?: CallOptions) {
    const req = { ...opts, query: { limit: 50, ...query } };
    return this.op("GET /v1/agents/{agent_id}/subjects", { agent_id: agentId }, req);
  }

  /** Erase the subject from every agent and pool of the tenant; the receipt. */
  forgetSubject(subject: string, keepTurns = false, opts?: CallOptions) {
    const req = { ...opts, json: { keep_turns: keepTurns } };
    return this.op("POST /v1/subjects/{subject}/forget", { subject }, req);
  }

  /** Mint a key within this key's own powers (the `keys` scope); the answer's api_key is the
   * secret, shown once. */
  createKey(scopes: string[], fields: Fields<"POST /v1/keys", "scopes"> = {}, opts?: CallOptions) {
    return this.op("POST /v1/keys", {}, { ...opts, json: { name: "", scopes, ...fields } });
  }

  /** The tenant's keys within this key's powers (prefixes, never secrets). */
  async listKeys(opts?: CallOptions) {
    return (await this.op("GET /v1/keys", {}, opts)).keys;
  }

  revokeKey(prefix: string, opts?: CallOptions) {
    return this.op("DELETE /v1/keys/{prefix}", { prefix }, opts);
  }
}

type MethodName = { [N in keyof Client]: Client[N] extends (...args: never[]) => unknown ? N : never }[keyof Client];

/** Every /v1 operation of the API and the Client method that calls it. The compiler holds it
 * to the generated schema (an operation missing here, or one the API no longer has, fails
 * the build); the drift test holds it to the API's own document. */
export const OPERATIONS = {
  "POST /v1/agents/{agent_id}/episodes": "addEpisode",
  "POST /v1/agents/{agent_id}/episodes/batch": "addEpisodes",
  "GET /v1/agents/{agent_id}/episodes/{episode_id}": "getEpisode",
  "POST /v1/agents/{agent_id}/episodes/{episode_id}/replay": "replayEpisode",
  "GET /v1/episodes": "listEpisodes",
  "GET /v1/usage": "usage",
  "POST /v1/agents/{agent_id}/memories": "addMemory",
  "GET /v1/agents/{agent_id}/memories": "listMemories",
  "POST /v1/agents/{agent_id}/memories/batch": "addMemories",
  "GET /v1/agents/{agent_id}/memories/{memory_id}": "getMemory",
  "PATCH /v1/agents/{agent_id}/memories/{memory_id}": "updateMemory",
  "DELETE /v1/agents/{agent_id}/memories/{memory_id}": "deleteMemory",
  "POST /v1/agents/{agent_id}/recall": "recall",
  "POST /v1/recall": "recallAgents",
  "POST /v1/agents/{agent_id}/consolidate": "consolidate",
  "GET /v1/agents/{agent_id}/consolidation/runs": "consolidationRuns",
  "GET /v1/agents/{agent_id}/consolidation": "consolidationStatus",
  "GET /v1/agents/{agent_id}/profile": "profile",
  "POST /v1/agents/{agent_id}/memories/{memory_id}/promote": "promote",
  "GET /v1/agents/{agent_id}/memories/{memory_id}/history": "history",
  "GET /v1/agents/{agent_id}/review": "reviews",
  "POST /v1/agents/{agent_id}/review/{review_id}/resolve": "resolveReview",
  "POST /v1/agents/{agent_id}/forget": "forget",
  "GET /v1/agents/{agent_id}/policy": "policy",
  "PUT /v1/agents/{agent_id}/policy": "setPolicy",
  "GET /v1/policy": "policy",
  "PUT /v1/policy": "setPolicy",
  "POST /v1/agents/{agent_id}/retention/run": "runRetention",
  "GET /v1/agents/{agent_id}/retention": "retentionRuns",
  "POST /v1/agents/{agent_id}/sessions": "createSession",
  "GET /v1/agents/{agent_id}/sessions": "sessions",
  "GET /v1/agents/{agent_id}/sessions/{session_id}": "session",
  "GET /v1/agents/{agent_id}/sessions/{session_id}/working": "working",
  "PATCH /v1/agents/{agent_id}/sessions/{session_id}/working": "updateWorking",
  "PUT /v1/agents/{agent_id}/sessions/{session_id}/plan": "setPlan",
  "GET /v1/agents/{agent_id}/sessions/{session_id}/plan": "plan",
  "PATCH /v1/agents/{agent_id}/sessions/{session_id}/plan/steps/{step_id}": "updateStep",
  "POST /v1/agents/{agent_id}/context": "context",
  "POST /v1/agents/{agent_id}/sessions/{session_id}/usage": "reportUsage",
  "GET /v1/agents/{agent_id}/sessions/{session_id}/context_calls": "contextCalls",
  "POST /v1/agents/{agent_id}/sessions/{session_id}/items": "addSessionItems",
  "GET /v1/agents/{agent_id}/sessions/{session_id}/items": "sessionItems",
  "DELETE /v1/agents/{agent_id}/sessions/{session_id}/items/last": "popSessionItem",
  "DELETE /v1/agents/{agent_id}/sessions/{session_id}/items": "clearSessionItems",
  "POST /v1/agents/{agent_id}/sessions/{session_id}/archive": "archiveSession",
  "POST /v1/agents/{agent_id}/sessions/{session_id}/restore": "restoreSession",
  "GET /v1/agents/{agent_id}/sessions/{session_id}/archives": "archives",
  "GET /v1/agents/{agent_id}/sessions/{session_id}/archives/{version}": "downloadArchive",
  "GET /v1/webhooks": "webhooks",
  "POST /v1/webhooks": "addWebhook",
  "DELETE /v1/webhooks/{webhook_id}": "deleteWebhook",
  "GET /v1/webhooks/{webhook_id}/deliveries": "webhookDeliveries",
  "GET /v1/pools": "pools",
  "POST /v1/pools/{pool}/memories": "addPoolMemory",
  "GET /v1/pools/{pool}/memories": "poolMemories",
  "POST /v1/pools/{pool}/memories/batch": "addPoolMemories",
  "DELETE /v1/pools/{pool}/memories/{memory_id}": "deletePoolMemory",
  "POST /v1/agents/{agent_id}/memories/{memory_id}/share": "shareMemory",
  "GET /v1/pools/{pool}/proposals": "poolProposals",
  "POST /v1/pools/{pool}/proposals/{proposal_id}/approve": "approvePoolProposal",
  "POST /v1/pools/{pool}/proposals/{proposal_id}/reject": "rejectPoolProposal",
  "GET /v1/agents/{agent_id}/export": "exportChunks",
  "GET /v1/export": "subjectExportChunks",
  "POST /v1/agents/{agent_id}/import": "importFile",
  "GET /v1/agents": "agents",
  "DELETE /v1/agents/{agent_id}": "eraseAgent",
  "GET /v1/agents/{agent_id}/subjects": "agentSubjects",
  "GET /v1/keys": "listKeys",
  "POST /v1/keys": "createKey",
  "DELETE /v1/keys/{prefix}": "revokeKey",
  "POST /v1/subjects/{subject}/forget": "forgetSubject",
} as const satisfies Record<OpKey, MethodName>;
