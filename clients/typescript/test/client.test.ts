// The SDK against a running memworker API (and a worker): MEMWORKER_URL, MEMWORKER_API_KEY,
// and MEMWORKER_OTHER_API_KEY (another tenant's key) for the isolation test. The tests import
// the package by its name, so they exercise the built dist/ as a consumer would.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";

import { ApiError, Client, ndjson, seg, Unreachable } from "memworker";

const URL_ = process.env.MEMWORKER_URL ?? "";
const KEY = process.env.MEMWORKER_API_KEY ?? "";
const OTHER_KEY = process.env.MEMWORKER_OTHER_API_KEY ?? "";
if (!URL_ || !KEY) {
  throw new Error("set MEMWORKER_URL and MEMWORKER_API_KEY to a running memworker API (memworker up prints both)");
}

const run = randomUUID().slice(0, 8); // fresh agents each run: a long-lived server keeps old ones
const agent = (name: string): string => `ts-${name}-${run}`;
const client = new Client(URL_, KEY);

async function refused(call: Promise<unknown>): Promise<ApiError> {
  const error: unknown = await call.then(
    () => assert.fail("the call succeeded; an ApiError was expected"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ApiError, `an ApiError, not ${String(error)}`);
  return error;
}

/** A TCP server that accepts connections and never answers: a call to it can only time out. */
async function silentServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => void sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  const close = (): Promise<void> => {
    sockets.forEach((s) => s.destroy());
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return { url: `http://127.0.0.1:${port}`, close };
}

describe("episodes", () => {
  test("an episode is accepted, processed by the worker, and its memories are recalled", async () => {
    const bot = agent("support");
    const ep = await client.addEpisode(bot, "The customer prefers email over phone. Ticket 4411 is about SSO.", {
      session_id: "s-42",
      idempotency_key: "turn-17",
    });
    assert.equal(ep.status, "queued");
    const again = await client.addEpisode(bot, "The customer prefers email over phone. Ticket 4411 is about SSO.", {
      idempotency_key: "turn-17",
    });
    assert.equal(again.episode_id, ep.episode_id); // the same turn, once
    const done = await client.waitForEpisode(bot, ep.episode_id, { waitMs: 60_000 });
    assert.equal(done.status, "stored", JSON.stringify(done));
    assert.ok(done.memory_ids.length > 0);
    const hits = (await client.recall(bot, "how does the customer want to be contacted?", 5)).memories;
    assert.ok(
      hits.some((h) => /email/i.test(h.text)),
      JSON.stringify(hits),
    );
    const listed = await client.listEpisodes({ agent_id: bot });
    assert.deepEqual(
      listed.map((e) => e.episode_id),
      [ep.episode_id],
    );
  });
});

describe("memories", () => {
  test("add, get, list, update and delete a memory", async () => {
    const bot = agent("crud");
    const m = await client.addMemory(bot, "Escalations go to the #sre channel.", {
      kind: "method",
      metadata: { team: "sre" },
    });
    assert.equal(m.text, "Escalations go to the #sre channel.");
    assert.equal(m.kind, "method");
    assert.equal((await client.getMemory(bot, m.id)).id, m.id);

    const page = await client.listMemories(bot, { metadata: { team: "sre" } });
    assert.deepEqual(
      page.memories.map((x) => x.id),
      [m.id],
    );
    assert.deepEqual((await client.listMemories(bot, { metadata: { team: "none" } })).memories, []);

    const changed = await client.updateMemory(bot, m.id, {
      text: "Escalations go to the #oncall channel.",
      salience: 0.9,
    });
    assert.equal(changed.text, "Escalations go to the #oncall channel.");
    assert.equal((await client.getMemory(bot, m.id)).text, "Escalations go to the #oncall channel.");

    await client.deleteMemory(bot, m.id);
    const gone = await refused(client.getMemory(bot, m.id));
    assert.equal(gone.status, 404);
    assert.ok(gone.apiMessage.length > 0);
  });

  test("a batch, recall with explain, and pages of a listing", async () => {
    const bot = agent("recall");
    const written = await client.addMemories(bot, [
      { text: "The deploy pipeline runs on GitHub Actions." },
      { text: "Invoices are sent on the first business day of the month." },
      { text: "The on-call rotation changes every Monday at 9:00 UTC." },
    ]);
    assert.equal(written.length, 3);
    const recalled = await client.recall(bot, "when are invoices sent?", 2, { explain: true });
    assert.equal(recalled.memories[0]?.text, "Invoices are sent on the first business day of the month.");
    assert.ok(recalled.memories.length <= 2);
    const seen: string[] = [];
    for await (const memory of client.iterMemories(bot, { limit: 2 })) seen.push(memory.id);
    assert.deepEqual(seen.sort(), written.map((w) => w.id).sort());
  });
});

describe("sessions", () => {
  test("working memory, a plan and its steps, and the runtime context", async () => {
    const bot = agent("planner");
    const s = await client.createSession(bot, { session_id: "s-1", goal: "migrate the billing database" });
    assert.equal(s.session_id, "s-1");
    const w = await client.updateWorking(bot, "s-1", {
      intent: "pick a maintenance window",
      add: [{ kind: "constraint", text: "no downtime during business hours" }],
    });
    assert.equal(w.intent, "pick a maintenance window");
    const read = await client.working(bot, "s-1");
    assert.equal(read.items, 1);
    assert.match(JSON.stringify(read), /no downtime during business hours/);

    const milestones = [
      {
        id: "m1",
        title: "prepare",
        steps: [
          { id: "s1", title: "snapshot" },
          { id: "s2", title: "rehearse" },
        ],
      },
    ];
    const plan = await client.setPlan(bot, "s-1", milestones, "migration");
    assert.equal(plan.session_id, "s-1");
    await client.updateStep(bot, "s-1", "s1", { status: "done", output: "snapshot taken" });
    const resume = (await client.plan(bot, "s-1")).resume;
    assert.match(JSON.stringify(resume), /s2|rehearse/);

    const ctx = await client.context(bot, "what next?", { session_id: "s-1", max_tokens: 400 });
    assert.match(JSON.stringify(ctx), /no downtime during business hours/);
    assert.ok((await client.sessions(bot)).some((x) => x.session_id === "s-1"));

    assert.equal((await client.archiveSession(bot, "s-1")).version, 1);
    assert.deepEqual(
      (await client.archives(bot, "s-1")).map((a) => a.version),
      [1],
    );
    const lines = await client.readArchive(bot, "s-1", 1);
    assert.equal(lines[0]?.type, "header");
    assert.equal(lines.at(-1)?.type, "footer");
    assert.deepEqual([...(await client.downloadArchive(bot, "s-1", 1)).slice(0, 2)], [0x1f, 0x8b]); // gzip, as stored
    assert.equal((await client.restoreSession(bot, "s-1")).status, "open");
  });

  test("session items: append in order, the last N, pop, clear", async () => {
    const bot = agent("items");
    await client.createSession(bot, { session_id: "log-1" });
    const items = [
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { type: "function_call", name: "lookup", arguments: "{}" },
    ];
    assert.deepEqual(await client.addSessionItems(bot, "log-1", items), [0, 1, 2]);
    assert.deepEqual(
      (await client.sessionItems(bot, "log-1")).map((x) => x.item),
      items,
    );
    assert.deepEqual(
      (await client.sessionItems(bot, "log-1", 2)).map((x) => x.position),
      [1, 2],
    );
    assert.deepEqual((await client.popSessionItem(bot, "log-1"))?.item, items[2]);
    assert.equal(await client.clearSessionItems(bot, "log-1"), 2);
    assert.equal(await client.popSessionItem(bot, "log-1"), null);
    assert.deepEqual(await client.sessionItems(bot, "log-1"), []);
  });

  test("the subject a caller acts for guards a session", async () => {
    const bot = agent("subjects");
    await client.createSession(bot, { session_id: "chat-a", subject: "cust-a" });
    assert.equal((await client.session(bot, "chat-a", { subject: "cust-a" })).session_id, "chat-a");
    const other = await refused(client.working(bot, "chat-a", { subject: "cust-b" }));
    assert.equal(other.status, 403);
  });
});

describe("the tenant", () => {
  test("agents, usage, policy and a memory's history; a key without the keys scope mints none", async () => {
    const bot = agent("admin");
    const m = await client.addMemory(bot, "Backups are kept for 35 days.");
    assert.ok((await client.history(bot, m.id)).events.length > 0);
    const seen: string[] = [];
    let cursor: string | null | undefined;
    do {
      const page = await client.agents({ limit: 2, cursor });
      seen.push(...page.agents.map((a) => a.agent_id));
      cursor = page.next_cursor;
    } while (cursor);
    assert.ok(seen.includes(bot), JSON.stringify(seen));
    assert.ok("effective" in (await client.policy(bot)));
    assert.ok("effective" in (await client.policy()));
    assert.ok((await client.usage(bot)) !== undefined);
    const denied = await refused(client.createKey(["memories:read"]));
    assert.equal(denied.status, 403);
    assert.match(denied.apiMessage, /keys/);
  });
});

describe("export and import", () => {
  test("an export downloads whole and as a stream, and imports into another agent", async () => {
    const bot = agent("export");
    const m = await client.addMemory(bot, "The staging database is rebuilt every night.");
    const whole = new TextDecoder().decode(await client.downloadExport(bot));
    const lines = whole
      .split("\n")
      .filter((l) => l)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(whole.includes("The staging database is rebuilt every night."));
    const streamed: Record<string, unknown>[] = [];
    for await (const record of ndjson(await client.exportChunks(bot))) streamed.push(record);
    assert.equal(streamed.length, lines.length);
    assert.ok(JSON.stringify(streamed).includes(m.id));

    const copy = agent("imported");
    const report = await client.importFile(copy, new TextEncoder().encode(whole));
    assert.equal(report.memories_written, 1, JSON.stringify(report));
    const texts = (await client.listMemories(copy)).memories.map((x) => x.text);
    assert.deepEqual(texts, ["The staging database is rebuilt every night."]);
  });
});

describe("errors", () => {
  test("bad input is an ApiError with the API's status and message, and changes nothing", async () => {
    const bot = agent("errors");
    const bad = await refused(client.recall(bot, "anything", 0));
    assert.equal(bad.status, 422);
    assert.match(bad.apiMessage, /^k: /);
    assert.equal(bad.message, `HTTP 422: ${bad.apiMessage}`);
    assert.deepEqual((bad.body as { error: string }).error, bad.apiMessage);
    const badImport = await refused(client.importFile(bot, '{"text": "fine"}\nnot json\n', "jsonl"));
    assert.equal(badImport.status, 422);
    assert.match(badImport.apiMessage, /line 2/);
    const none = await refused(client.listMemories(bot)); // not even the agent was created
    assert.equal(none.status, 404);
  });

  test("ids are escaped path segments; '.' and '..' are refused before anything is sent", async () => {
    assert.equal(seg("../other-agent?x#y"), "..%2Fother-agent%3Fx%23y");
    assert.throws(() => seg(".."), /'\.\.' is not a valid id/);
    await assert.rejects(client.getMemory(agent("x"), "."), TypeError);
    const sneaky = await refused(client.plan(agent("planner"), "../../other/memories?"));
    assert.ok([404, 422].includes(sneaky.status), String(sneaky.status));
  });

  test("nothing listening at the URL is Unreachable, naming the URL and what to check", async () => {
    const { url, close } = await silentServer();
    await close(); // the port is free now: nothing listens there
    const error: unknown = await new Client(url, KEY).usage().catch((e: unknown) => e);
    assert.ok(error instanceof Unreachable, String(error));
    assert.ok(error instanceof ApiError);
    assert.equal(error.status, 0);
    assert.equal(error.url, url);
    assert.match(error.message, new RegExp(`cannot reach the memworker API at ${url}.*memworker up`));
    assert.throws(() => new Client("ftp://example.com", KEY), /must start with http:\/\/ or https:\/\//);
  });

  test("timeoutMs ends a call with no answer; a caller's signal aborts with its own reason", async () => {
    const silent = await silentServer();
    try {
      const started = Date.now();
      const late: unknown = await new Client(silent.url, KEY, { timeoutMs: 200 }).usage().catch((e: unknown) => e);
      assert.ok(late instanceof Unreachable, String(late));
      assert.match(late.message, /did not answer in time/);
      assert.ok(Date.now() - started < 5_000);

      const patient = new Client(silent.url, KEY, { timeoutMs: 0 });
      await assert.rejects(patient.usage(undefined, { signal: AbortSignal.timeout(100) }), { name: "TimeoutError" });
      const controller = new AbortController();
      const call = patient.usage(undefined, { signal: controller.signal });
      controller.abort(new Error("the agent moved on"));
      await assert.rejects(call, /the agent moved on/);
    } finally {
      await silent.close();
    }
    await assert.rejects(client.usage(undefined, { signal: AbortSignal.abort() }), { name: "AbortError" });
  });
});

describe("tenants", () => {
  let memoryId = "";
  const bot = agent("isolated");
  before(async () => {
    memoryId = (await client.addMemory(bot, "The vault combination is kept by the CFO.")).id;
  });

  test(
    "another tenant's key sees nothing of this tenant's memories",
    { skip: !OTHER_KEY && "MEMWORKER_OTHER_API_KEY not set" },
    async () => {
      const other = new Client(URL_, OTHER_KEY);
      const hidden = await refused(other.getMemory(bot, memoryId));
      assert.equal(hidden.status, 404);
      const calls = [
        () => other.recall(bot, "vault combination"),
        () => other.listMemories(bot),
        () => other.downloadExport(bot),
      ];
      for (const call of calls) {
        const unknown = await refused(call());
        assert.equal(unknown.status, 404); // this tenant's agent does not exist for another
        assert.match(unknown.apiMessage, /not found/);
      }
      assert.equal((await client.getMemory(bot, memoryId)).id, memoryId); // still there for its owner
    },
  );
});

describe("retries", () => {
  after(async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // the refilled bucket for whatever runs next
  });

  test("a 429 is sent again after its Retry-After; retries: 0 gives the ApiError", async () => {
    // Bad keys spend this client address's failed-authentication bucket: then every request
    // from it, good keys too, is answered 429 with a Retry-After until the bucket refills.
    const bad = new Client(URL_, "mw_not-a-key", { retries: 0 });
    let status = 0;
    for (let i = 0; i < 500 && status !== 429; i++) status = (await refused(bad.usage())).status;
    assert.equal(status, 429);

    const impatient = await refused(new Client(URL_, KEY, { retries: 0 }).usage());
    assert.equal(impatient.status, 429);
    assert.ok(impatient.apiMessage.length > 0);

    const statuses: number[] = [];
    const counting: typeof fetch = async (input, init) => {
      const resp = await fetch(input, init);
      statuses.push(resp.status);
      return resp;
    };
    const started = Date.now();
    const usage = await new Client(URL_, KEY, { fetch: counting }).usage();
    assert.ok(usage !== undefined);
    assert.equal(statuses[0], 429, JSON.stringify(statuses));
    assert.equal(statuses.at(-1), 200);
    assert.ok(Date.now() - started >= 500, "it waited for the Retry-After");
  });
});
