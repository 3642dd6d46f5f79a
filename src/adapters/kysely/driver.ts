import { AdapterError } from "../../core/errors.ts";

/**
 * The driver module `load` imports (`load` is `() => import(name)`). When
 * the package `name` itself is not installed: an AdapterError that names it
 * and the command that installs it, with the import's error as `cause`.
 * Any other failure of `load` (the package is there but fails to load, or
 * one of its own dependencies is missing) is rethrown as it is.
 */
export async function loadDriver<M>(name: string, adapter: string, load: () => Promise<M>): Promise<M> {
  try {
    return await load();
  } catch (error) {
    const { code, message } = error as { code?: unknown; message?: unknown };
    const notFound = code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND";
    // Node: "Cannot find package 'pg' imported from …"; Deno: "… package for 'npm:pg' …".
    if (notFound && typeof message === "string" && new RegExp(`['"](npm:)?${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}['"]`).test(message)) {
      throw new AdapterError(`the ${adapter} adapter needs the "${name}" driver, which is not installed: npm install ${name}`, { cause: error });
    }
    throw error;
  }
}
