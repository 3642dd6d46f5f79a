/**
 * mysqlAdapter's `uri`: one mysql2 cannot read is refused when the adapter
 * is made, with a message that does not repeat it (before, every call
 * failed with an AdapterError whose cause held the whole URI, password
 * included, and a worker retried forever). Needs no server.
 */
import { describe, expect, it } from "vitest";
import { mysqlAdapter } from "../../src/adapters/mysql/index.ts";
import { InvalidArgumentError } from "../../src/core/errors.ts";

describe("mysql: the uri option", () => {
  it("a URI that is not a URL is InvalidArgumentError at once, and no message or cause holds its password", () => {
    for (const uri of ["mysql://root:s3cret@host:33o6/app", "mysql://root:s3cret@[bad/app", "mysql://root:s3cret@host:99999/app", ""]) {
      let error: unknown = null;
      try {
        mysqlAdapter({ uri });
      } catch (e) {
        error = e;
      }
      expect(error, uri).toBeInstanceOf(InvalidArgumentError);
      expect(JSON.stringify({ message: (error as Error).message, cause: String((error as Error).cause ?? "") })).not.toContain("s3cret");
    }
  });

  it("a URL mysql2 reads is taken (nothing is opened until the first call)", async () => {
    const adapter = mysqlAdapter({ uri: "mysql://root:s3cret@127.0.0.1:3306/app" });
    await adapter.close();
  });
});
