/** The errors every Client method throws: ApiError for an answer that is an error, and
 * Unreachable (an ApiError with status 0) when no answer came at all. */

/** The API answered with an error (4xx/5xx). `apiMessage` is the API's own message
 * (`body.error`), `body` the decoded answer (JSON, or its text when it is not JSON). */
export class ApiError extends Error {
  readonly status: number;
  readonly body: unknown;
  readonly apiMessage: string;

  constructor(status: number, body: unknown, options?: { cause?: unknown }) {
    const apiMessage = messageOf(body);
    super(`HTTP ${status}: ${apiMessage}`, options);
    this.name = "ApiError";
    this.status = status;
    this.body = body;
    this.apiMessage = apiMessage;
  }
}

function messageOf(body: unknown): string {
  if (body !== null && typeof body === "object" && "error" in body) {
    return String((body as { error: unknown }).error);
  }
  return typeof body === "string" ? body : JSON.stringify(body);
}

/** No answer from the API: nothing listens at the URL, the name does not resolve, the
 * connection failed or the call timed out (`timeoutMs`). `status` is 0; the message names
 * the URL and what to check; `cause` is the underlying error. */
export class Unreachable extends ApiError {
  readonly url: string;

  constructor(url: string, cause: unknown, hint: string) {
    super(0, null, { cause });
    this.name = "Unreachable";
    this.url = url;
    this.message = `cannot reach the memworker API at ${url} (${describe(cause)}): ${hint}`;
  }
}

/** The hint for a failed fetch, from the system error under undici's "fetch failed". */
export function hintFor(cause: unknown): string {
  const code = codeOf(cause);
  if (code === "ECONNREFUSED") return "is `memworker up` (or the API) running there?";
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return "the host name does not resolve: check the URL";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET") {
    return "the connection was reset; retry, and check the API's log if it goes on";
  }
  return "the connection failed; retry, and check the API's log if it goes on";
}

function codeOf(error: unknown): string | undefined {
  for (let e = error, depth = 0; e !== null && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function describe(error: unknown): string {
  const code = codeOf(error);
  const text = error instanceof Error ? error.message : String(error);
  return code && !text.includes(code) ? `${text}: ${code}` : text;
}
