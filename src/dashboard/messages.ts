/**
 * Banner messages carried through a redirect (`?notice=…&sig=…`). Only a
 * message the server signed for the page it redirects to is shown, so a
 * link cannot put its own text into the page's status or alert banner, nor
 * move a signed one to another page (job 20's "cancelled" onto job 21's).
 */
import { sameText, type Signer } from "./security.ts";

export type MessageKind = "notice" | "error";

/** `to` with the signed message appended to its query. */
export async function withMessage(signer: Signer, to: string, kind: MessageKind, text: string): Promise<string> {
  const q = new URLSearchParams({ [kind]: text, sig: await signer.mac(purpose(kind, new URL(to, "http://docket.invalid").pathname), text) }).toString();
  return `${to}${to.includes("?") ? "&" : "?"}${q}`;
}

/** The notice and error of a request URL whose signature verifies; unsigned or forged ones are null. */
export async function readMessages(signer: Signer, url: URL): Promise<{ notice: string | null; error: string | null }> {
  const sig = url.searchParams.get("sig") ?? "";
  const verified = async (kind: MessageKind) => {
    const text = url.searchParams.get(kind);
    return text !== null && sameText(sig, await signer.mac(purpose(kind, url.pathname), text)) ? text : null;
  };
  return { notice: await verified("notice"), error: await verified("error") };
}

/** What a banner's signature covers besides its text: its kind and the path of the page that shows it. */
function purpose(kind: MessageKind, path: string): string {
  return `${kind} ${path}`;
}
