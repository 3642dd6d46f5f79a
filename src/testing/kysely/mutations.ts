import {
  AliasNode,
  IdentifierNode,
  LimitNode,
  RawNode,
  OperationNodeTransformer,
  OrActionNode,
  PrimitiveValueListNode,
  SelectionNode,
  ValueNode,
  WhereNode,
  type InsertQueryNode,
  type Dialect,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type SelectQueryNode,
  type UnknownRow,
  type UpdateQueryNode,
} from "kysely";
import type { Capabilities, Engine } from "../../adapters/kysely/engine.ts";

/**
 * docket's mutation switch, for tests only: each mutation removes ONE
 * protection from the real adapters (through the `instrument` seam: a kysely
 * plugin that rewrites the operation-node tree, or a dialect wrapper), so the
 * property suite can show it catches the bug that opens. Production code has
 * no switch: nothing in src/core or src/adapters knows about this file.
 *
 * Where docket has defence in depth (one guard backed by another), the
 * mutation removes the whole protection of that property and says so.
 */
export interface Mutation {
  readonly id: string;
  readonly description: string;
  /** Which adapters it applies to, by capability (never by name), and why the others are excluded. */
  appliesTo(adapter: MutationTarget): boolean;
  readonly notApplicableBecause?: string;
  readonly plugins?: () => KyselyPlugin[];
  readonly wrapDialect?: (d: Dialect) => Dialect;
  readonly wrapEngine?: (e: Engine) => Engine;
  /**
   * Set when the mutation also changes sequential behaviour that the model
   * test would flag for a reason other than the removed protection; the
   * runner then skips the model test and only the concurrent schedules judge.
   */
  readonly schedulesOnly?: string;
  /**
   * Set when the removed protection matters only when another session
   * writes in between (a row lock, a transaction, a fence against a
   * concurrent write): the model test, one worker's calls in sequence,
   * cannot observe it, so the runner goes straight to the schedules.
   */
  readonly concurrentOnly?: string;
}

/** The capabilities a mutation may depend on (the engine's, see KyselyStore.capabilities). */
export type MutationTarget = Pick<Capabilities, "skipLocked" | "returning">;

// ---------------------------------------------------------------- node helpers

function columnName(node: OperationNode | undefined): string | null {
  if (!node) return null;
  if (node.kind === "ReferenceNode") return columnName((node as unknown as { column: OperationNode }).column);
  if (node.kind === "ColumnNode") return (node as unknown as { column: { name: string } }).column.name;
  // `coalesce(column, '')`: how a write by id tests its states (guard.ts byIdInStates).
  if (node.kind === "FunctionNode") {
    const fn = node as unknown as { func: string; arguments: readonly OperationNode[] };
    if (fn.func === "coalesce") return columnName(fn.arguments[0]);
  }
  return null;
}

/** `column op …` as written by `.where(column, op, value)`. */
export interface PredicateShape {
  column: string;
  operator: string;
}

function isPredicate(node: OperationNode, p: PredicateShape): boolean {
  if (node.kind !== "BinaryOperationNode") return false;
  const b = node as unknown as { leftOperand: OperationNode; operator: { operator: string }; rightOperand: OperationNode };
  return columnName(b.leftOperand) === p.column && b.operator.operator === p.operator;
}

function hasPredicate(node: OperationNode | undefined, p: PredicateShape): boolean {
  if (!node) return false;
  if (node.kind === "WhereNode") return hasPredicate((node as WhereNode).where, p);
  if (node.kind === "AndNode") {
    const a = node as unknown as { left: OperationNode; right: OperationNode };
    return hasPredicate(a.left, p) || hasPredicate(a.right, p);
  }
  if (node.kind === "ParensNode") return hasPredicate((node as unknown as { node: OperationNode }).node, p);
  return isPredicate(node, p);
}

/** The conjunction without the conjuncts matching any of `ps` (null when nothing is left). */
function strip(node: OperationNode, ps: readonly PredicateShape[]): OperationNode | null {
  if (node.kind === "AndNode") {
    const a = node as unknown as { left: OperationNode; right: OperationNode };
    const l = strip(a.left, ps);
    const r = strip(a.right, ps);
    if (l === null) return r;
    if (r === null) return l;
    return { ...node, left: l, right: r } as OperationNode;
  }
  if (node.kind === "ParensNode") {
    const inner = strip((node as unknown as { node: OperationNode }).node, ps);
    return inner === null ? null : ({ ...node, node: inner } as OperationNode);
  }
  return ps.some((p) => isPredicate(node, p)) ? null : node;
}

function stripWhere(where: WhereNode | undefined, ps: readonly PredicateShape[]): WhereNode | undefined {
  if (!where) return undefined;
  const rest = strip(where.where, ps);
  return rest === null ? undefined : WhereNode.create(rest);
}

/** The literal the UPDATE sets `state` to, if any. */
function setsState(node: UpdateQueryNode): unknown {
  for (const u of node.updates ?? []) {
    if (columnName(u.column) === "state" && u.value.kind === "ValueNode") return (u.value as unknown as { value: unknown }).value;
  }
  return undefined;
}

const STATE_IN: PredicateShape = { column: "state", operator: "in" };
const DUE: PredicateShape = { column: "run_at", operator: "<=" };
const LEASE_TOKEN: PredicateShape = { column: "lease_token", operator: "=" };
const LEASE_EXPIRED: PredicateShape = { column: "lease_expires_at", operator: "<=" };

const QUEUE_IN: PredicateShape = { column: "queue", operator: "in" };
const NAME_IN: PredicateShape = { column: "name", operator: "in" };
const ID_EQ: PredicateShape = { column: "id", operator: "=" };
const STATE_EQ: PredicateShape = { column: "state", operator: "=" };

/** The (unqualified) table a query reads or writes, by name suffix: "jobs", "concurrency_keys", "queues", "tasks". */
function tableName(node: OperationNode | undefined): string {
  if (!node) return "";
  if (node.kind === "TableNode") return (node as unknown as { table: { identifier: { name: string } } }).table.identifier.name;
  if (node.kind === "AliasNode") return tableName((node as unknown as { node: OperationNode }).node);
  return "";
}
const fromTable = (n: SelectQueryNode) => tableName(n.from?.froms[0]);
const isTable = (name: string, table: "jobs" | "concurrency_keys" | "queues" | "tasks" | "rate_keys" | "fair_keys") => name === table || name.endsWith(`_${table}`);

function selectsOnly(n: SelectQueryNode, column: string): boolean {
  const sel = n.selections ?? [];
  return sel.length === 1 && columnName(sel[0]!.selection as OperationNode) === column;
}
function updatesColumn(n: UpdateQueryNode, column: string): boolean {
  return (n.updates ?? []).some((u) => columnName(u.column) === column);
}
const withoutRowLocks = (n: SelectQueryNode): SelectQueryNode => ({
  ...n,
  endModifiers: n.endModifiers?.filter((m) => m.modifier !== "ForUpdate" && m.modifier !== "SkipLocked"),
});
/** `LIMIT 0`: the SELECT returns no row. */
const noRows = (n: SelectQueryNode): SelectQueryNode => ({ ...n, limit: LimitNode.create(ValueNode.createImmediate(0)) });

/** Claim's candidate SELECT: ready jobs of a group of queues (`state IN … AND queue IN …`); nothing else filters by `queue IN`. */
const isClaimSelect = (n: SelectQueryNode) => isTable(fromTable(n), "jobs") && hasPredicate(n.where, STATE_IN) && hasPredicate(n.where, QUEUE_IN);
/** Claim's UPDATE: the only write that sets state running AND the attempt (a heartbeat sets state running, not the attempt). */
const isClaimUpdate = (n: UpdateQueryNode) => setsState(n) === "running" && updatesColumn(n, "attempt");
/** Staging's reads and writes of unkeyed due jobs, and a keyed job's stage/stageBlocked write: the only ones fenced by `run_at <= now` at top level. */
const isStageSelect = (n: SelectQueryNode) => hasPredicate(n.where, DUE) && hasPredicate(n.where, STATE_IN);
const isStageUpdate = (n: UpdateQueryNode) => hasPredicate(n.where, DUE);
/** The key lock: `SELECT name FROM concurrency_keys WHERE name = ? FOR UPDATE`. */
const isKeyLock = (n: SelectQueryNode) => isTable(fromTable(n), "concurrency_keys");
/** A slot-freeing write's first statement: `SELECT concurrency_key FROM jobs WHERE id = ?` (which key to lock and rebalance). */
const isFreeingKeyRead = (n: SelectQueryNode) => isTable(fromTable(n), "jobs") && selectsOnly(n, "concurrency_key") && hasPredicate(n.where, ID_EQ);
/** A cap's count: `SELECT count(*) AS n FROM jobs WHERE queue|task = ? AND state = 'running'` (key holders are counted with `state IN`). */
const isRunningCount = (n: SelectQueryNode) =>
  isTable(fromTable(n), "jobs") && hasPredicate(n.where, STATE_EQ) && !hasPredicate(n.where, KEY_EQ) && (n.selections ?? []).length === 1 && n.selections![0]!.selection.kind === "AliasNode";
/**
 * A bulk promotion's read of a key's blocked jobs, `… FROM jobs WHERE concurrency_key = <the key's row> AND state = 'blocked' ORDER BY … LIMIT …`
 * (a LATERAL read on PostgreSQL, a correlated scalar read elsewhere).
 */
const isBlockedRead = (n: SelectQueryNode) => isTable(fromTable(n), "jobs") && hasPredicate(n.where, KEY_EQ) && hasPredicate(n.where, STATE_EQ) && n.limit !== undefined;
/** An ORDER BY item on the `fair_tag` column. */
const isFairTagOrder = (item: { orderBy: unknown }) => JSON.stringify(item.orderBy).includes('"fair_tag"');

/** Mutation: claims of a fair queue ignore the jobs' tags (they take its jobs by id), so a flooding key takes every slot. */
export function fairOrderIgnored(): KyselyPlugin {
  return rewritePlugin({
    select: (n) => {
      const items = n.orderBy?.items ?? [];
      if (!items.some(isFairTagOrder)) return n;
      return { ...n, orderBy: { ...n.orderBy!, items: items.filter((i) => !isFairTagOrder(i)) } };
    },
  });
}

/** Claim's control reads: queue controls (`name IN`, locked) and task caps. */
const isControlRead = (n: SelectQueryNode) => (isTable(fromTable(n), "queues") || isTable(fromTable(n), "tasks")) && hasPredicate(n.where, NAME_IN);

/** What `rewritePlugin` does to each SELECT, UPDATE and INSERT it sees (nested ones too); a missing member leaves that kind of statement as it is. */
export interface Rewrite {
  select?: (n: SelectQueryNode) => SelectQueryNode;
  update?: (n: UpdateQueryNode) => UpdateQueryNode;
  insert?: (n: InsertQueryNode) => InsertQueryNode;
}

class RewriteTransformer extends OperationNodeTransformer {
  constructor(readonly rewrite: Rewrite) {
    super();
  }
  protected override transformSelectQuery(node: SelectQueryNode): SelectQueryNode {
    const t = super.transformSelectQuery(node);
    return this.rewrite.select ? this.rewrite.select(t) : t;
  }
  protected override transformUpdateQuery(node: UpdateQueryNode): UpdateQueryNode {
    const t = super.transformUpdateQuery(node);
    return this.rewrite.update ? this.rewrite.update(t) : t;
  }
  protected override transformInsertQuery(node: InsertQueryNode): InsertQueryNode {
    const t = super.transformInsertQuery(node);
    return this.rewrite.insert ? this.rewrite.insert(t) : t;
  }
}

/** A kysely plugin that rewrites SELECTs, UPDATEs and INSERTs (nested ones too, e.g. inside a CTE). */
export function rewritePlugin(rewrite: Rewrite): KyselyPlugin {
  const transformer = new RewriteTransformer(rewrite);
  return {
    transformQuery: (args: PluginTransformQueryArgs): RootOperationNode => transformer.transformNode(args.node) as RootOperationNode,
    transformResult: async (args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> => args.result,
  };
}

/** Wraps a dialect's driver so that begin/commit/rollback are no-ops: every statement autocommits. */
export function withoutTransactions(inner: Dialect): Dialect {
  return {
    createAdapter: () => inner.createAdapter(),
    createIntrospector: (db) => inner.createIntrospector(db),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createDriver: () => {
      const d = inner.createDriver();
      return {
        init: () => d.init(),
        acquireConnection: () => d.acquireConnection(),
        beginTransaction: async () => undefined,
        commitTransaction: async () => undefined,
        rollbackTransaction: async () => undefined,
        releaseConnection: (c) => d.releaseConnection(c),
        destroy: () => d.destroy(),
      };
    },
  };
}

/** The conjunction with each `state IN (…)` conjunct's list replaced by `states`. */
function withStatesIn(node: OperationNode, states: readonly string[]): OperationNode {
  if (node.kind === "AndNode") {
    const a = node as unknown as { left: OperationNode; right: OperationNode };
    return { ...node, left: withStatesIn(a.left, states), right: withStatesIn(a.right, states) } as OperationNode;
  }
  if (node.kind === "ParensNode") return { ...node, node: withStatesIn((node as unknown as { node: OperationNode }).node, states) } as OperationNode;
  if (!isPredicate(node, STATE_IN)) return node;
  return { ...node, rightOperand: PrimitiveValueListNode.create(states) } as OperationNode;
}

const KEY_EQ: PredicateShape = { column: "concurrency_key", operator: "=" };
const IDEMPOTENCY_EQ: PredicateShape = { column: "idempotency_key", operator: "=" };
const KEY_IN: PredicateShape = { column: "concurrency_key", operator: "in" };
/**
 * A key's holder count, `SELECT count(*) AS n FROM jobs WHERE concurrency_key = ? AND state IN (…)`, or several keys'
 * (`SELECT concurrency_key, count(*) AS n … WHERE concurrency_key IN (…) AND state IN (…) GROUP BY concurrency_key`);
 * the bulk count that also finds due jobs is isBulkHolderCount.
 */
const isHolderCount = (n: SelectQueryNode) => {
  if (!isTable(fromTable(n), "jobs") || !hasPredicate(n.where, STATE_IN)) return false;
  const selections = n.selections ?? [];
  const counts = selections.length > 0 && selections[selections.length - 1]!.selection.kind === "AliasNode";
  if (hasPredicate(n.where, KEY_EQ)) return counts && selections.length === 1;
  return counts && selections.length === 2 && hasPredicate(n.where, KEY_IN) && n.groupBy !== undefined;
};

/**
 * Race mutant: a key's holders are counted in `states` instead of the slot-holding states: the `state IN (…)`
 * of a single key's count, and of the bulk count's `sum(CASE WHEN state IN (…) THEN 1 ELSE 0 END) AS n`.
 */
export function holdersCountedIn(states: readonly string[]): KyselyPlugin {
  return rewritePlugin({
    select: (n) => {
      if (isHolderCount(n) && n.where) return { ...n, where: WhereNode.create(withStatesIn(n.where.where, states)) };
      if (isBulkHolderCount(n)) return { ...n, selections: n.selections!.map((s) => (aliasOf(s.selection) === "n" ? (everyStatesIn(s, states) as typeof s) : s)) };
      return n;
    },
  });
}

/** The bulk count of holders (and due jobs) per key: `SELECT concurrency_key, sum(CASE …) AS n, max(CASE …) AS due … GROUP BY concurrency_key`. */
const isBulkHolderCount = (n: SelectQueryNode) =>
  isTable(fromTable(n), "jobs") && hasPredicate(n.where, KEY_IN) && n.groupBy !== undefined && (n.selections ?? []).some((s) => aliasOf(s.selection) === "due");

function aliasOf(node: OperationNode): string | null {
  if (node.kind !== "AliasNode") return null;
  const alias = (node as unknown as { alias: OperationNode }).alias;
  return alias.kind === "IdentifierNode" ? (alias as unknown as { name: string }).name : null;
}

/** `node` with every `state IN (…)` predicate anywhere inside it (a CASE's WHEN too) listing `states` instead. */
function everyStatesIn(node: unknown, states: readonly string[]): unknown {
  if (Array.isArray(node)) return node.map((x) => everyStatesIn(x, states));
  if (node === null || typeof node !== "object") return node;
  if ("kind" in node && isPredicate(node as OperationNode, STATE_IN)) return { ...node, rightOperand: PrimitiveValueListNode.create(states) };
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, everyStatesIn(v, states)]));
}

/** Race mutant: a cap's running count counts every job of the queue or task, whatever its state (the job about to be claimed too). */
export function runningCountedInAnyState(): KyselyPlugin {
  return rewritePlugin({ select: (n) => (isRunningCount(n) ? { ...n, where: stripWhere(n.where, [STATE_EQ]) } : n) });
}

/** A hand-off's pick of a capped queue's next ready jobs (see hand-off.ts): from jobs, locked, its LIMIT `least(<freed>, greatest(0, <cap> + <freed> - (<running>)))`. */
const isHandOffPick = (n: SelectQueryNode) =>
  isTable(fromTable(n), "jobs") && n.limit?.limit.kind === "RawNode" && (n.limit.limit as RawNode).sqlFragments[0] === "least(" && (n.endModifiers ?? []).some((m) => m.modifier === "ForUpdate");

/** Race mutant: a hand-off takes as many jobs as the cap's room it counted, `greatest(0, cap + freed - running)`, not at most the slots its completions freed. */
export function handOffUnboundedByFreed(): KyselyPlugin {
  return rewritePlugin({
    select: (n) => {
      if (!isHandOffPick(n)) return n;
      const raw = n.limit!.limit as RawNode;
      return { ...n, limit: LimitNode.create(RawNode.create(["(", ") * 0 + greatest(0, ", " + ", " - (", "))"], raw.parameters)) };
    },
  });
}

const DIED_BY: PredicateShape = { column: "finished_at", operator: "<=" };
/** Bulk replay's (and purge's) pick: `SELECT id FROM jobs WHERE state IN (…) AND finished_at <= ? … FOR UPDATE SKIP LOCKED`. */
const isDeadPick = (n: SelectQueryNode) => isTable(fromTable(n), "jobs") && selectsOnly(n, "id") && hasPredicate(n.where, DIED_BY);
/** A replay's UPDATE: the only write that sets state scheduled AND the attempt (a retry sets scheduled, not the attempt). */
const isReplayUpdate = (n: UpdateQueryNode) => setsState(n) === "scheduled" && updatesColumn(n, "attempt");

const ID_IN: PredicateShape = { column: "id", operator: "in" };
/** Race mutant: bulk replay picks dead jobs without locking them and writes them (`id IN …`) without the replay's `state IN (dead)` guard; a single replay keeps its guard. */
export function replayUnlockedUnguarded(): KyselyPlugin {
  return rewritePlugin({
    select: (n) => (isDeadPick(n) ? withoutRowLocks(n) : n),
    update: (n) => (isReplayUpdate(n) && hasPredicate(n.where, ID_IN) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
  });
}

/**
 * Race mutant: an enqueue that meets a held idempotency key fails on the key's uniqueness instead of returning
 * the holder: the jobs INSERT loses its `ON CONFLICT DO NOTHING` (PostgreSQL, SQLite), and the engine no longer
 * recognises a duplicate key (MySQL, which catches it).
 */
export const idempotencyConflictsUnhandled = {
  plugins: () => [rewritePlugin({ insert: (n) => (isTable(tableName(n.into), "jobs") && n.onConflict ? { ...n, onConflict: undefined } : n) })],
  wrapEngine: (engine: Engine): Engine => ({ ...engine, isUniqueViolation: () => false }),
};

const DEBOUNCE_KEY_EQ: PredicateShape = { column: "debounce_key", operator: "=" };
const DEBOUNCE_PENDING_EQ: PredicateShape = { column: "debounce_pending", operator: "=" };
/** A debounced enqueue's find: `SELECT * FROM jobs WHERE debounce_key = ? (debounce_pending = ? on MariaDB) AND … AND state IN (pending) FOR UPDATE`. */
const isDebounceFind = (n: SelectQueryNode) => isTable(fromTable(n), "jobs") && (hasPredicate(n.where, DEBOUNCE_KEY_EQ) || hasPredicate(n.where, DEBOUNCE_PENDING_EQ));
/** The merge: the only write that sets state scheduled AND the payload. */
const isDebounceMerge = (n: UpdateQueryNode) => setsState(n) === "scheduled" && updatesColumn(n, "payload");

/** The conjunction with `debounce_pending = ?` matching `debounce_key` instead (the key in any state). */
function pendingColumnAsKey(node: OperationNode): OperationNode {
  if (node.kind === "AndNode") {
    const a = node as unknown as { left: OperationNode; right: OperationNode };
    return { ...node, left: pendingColumnAsKey(a.left), right: pendingColumnAsKey(a.right) } as OperationNode;
  }
  if (node.kind === "ParensNode") return { ...node, node: pendingColumnAsKey((node as unknown as { node: OperationNode }).node) } as OperationNode;
  if (!isPredicate(node, DEBOUNCE_PENDING_EQ)) return node;
  const b = node as unknown as { leftOperand: OperationNode };
  return { ...node, leftOperand: everyColumnNamed(b.leftOperand, "debounce_pending", "debounce_key") } as OperationNode;
}

/** `node` with every reference to column `from` naming `to` instead. */
function everyColumnNamed(node: unknown, from: string, to: string): unknown {
  if (Array.isArray(node)) return node.map((x) => everyColumnNamed(x, from, to));
  if (node === null || typeof node !== "object") return node;
  const n = node as { kind?: string; name?: string };
  if (n.kind === "IdentifierNode" && n.name === from) return { ...n, name: to };
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, everyColumnNamed(v, from, to)]));
}

/**
 * Race mutant (R22): a debounced enqueue looks its key up in any state, without locking the row (the find loses
 * `state IN (pending)` and `FOR UPDATE`, and on MariaDB matches `debounce_key` rather than the pending-only
 * generated column), and merges without the `debounce` write's state guard: it merges into a job a claim took
 * (or one that finished) instead of storing the key's next job.
 */
export function debounceUnguarded(): KyselyPlugin {
  return rewritePlugin({
    select: (n) => (isDebounceFind(n) && n.where ? { ...withoutRowLocks(n), where: WhereNode.create(pendingColumnAsKey(stripWhere(n.where, [STATE_IN])!.where)) } : n),
    update: (n) => (isDebounceMerge(n) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
  });
}

/** The fence of a write that ends a job without settling its children: `has_children = 0` (see kysely/dependencies.ts `childless`). */
const CHILDLESS: PredicateShape = { column: "has_children", operator: "=" };

/**
 * Race mutant (R23, enqueue): writes that end a job lose their `has_children = 0` fence, so the fast paths end a
 * parent without settling its children: a child an enqueue stored while the parent finished waits forever.
 */
export function childlessFenceDropped(): KyselyPlugin {
  return rewritePlugin({
    select: (n) => (hasPredicate(n.where, CHILDLESS) ? { ...n, where: stripWhere(n.where, [CHILDLESS]) } : n),
    update: (n) => (hasPredicate(n.where, CHILDLESS) ? { ...n, where: stripWhere(n.where, [CHILDLESS]) } : n),
  });
}

/**
 * Race mutant (R23): a parent's success reads its waiting children's counts without locking their rows, then
 * writes the counts it read less one: two parents ending at once both read 2 and both write 1, and the child
 * is never released.
 */
export function waitCountsUnlocked(): KyselyPlugin {
  return rewritePlugin({
    select: (n) => (isTable(fromTable(n), "jobs") && (n.selections ?? []).some((s) => columnName(s.selection as OperationNode) === "waiting_on") ? withoutRowLocks(n) : n),
  });
}

/** Race mutant (R13): the sweep's list of expired leases is always empty, so a crashed worker's job is never reclaimed. */
export function expiredLeasesUnlisted(): KyselyPlugin {
  return rewritePlugin({ select: (n) => (isTable(fromTable(n), "jobs") && hasPredicate(n.where, LEASE_EXPIRED) ? noRows(n) : n) });
}

/** Race mutant (R15): staging admits nothing, so a retry (a scheduled row) never becomes ready. */
export function stagingAdmitsNothing(): KyselyPlugin {
  return rewritePlugin({ select: (n) => (isStageSelect(n) ? noRows(n) : n) });
}

/** A holder's retry write: sets state scheduled and the error, not the attempt, fenced by the lease token (a sweeper's also by expiry). */
const isRetryUpdate = (n: UpdateQueryNode) => setsState(n) === "scheduled" && updatesColumn(n, "last_error") && !updatesColumn(n, "attempt");

/** Race mutant (R16): the holder's retry write loses its state and lease fence, so it overwrites a concurrent cancel. */
export function retryUnfenced(): KyselyPlugin {
  return rewritePlugin({
    update: (n) => (isRetryUpdate(n) && !hasPredicate(n.where, LEASE_EXPIRED) ? { ...n, where: stripWhere(n.where, [STATE_IN, LEASE_TOKEN]) } : n),
  });
}

/** Race mutant (R19): the sweeper's expire write loses its state, token and expiry fence, so two sweepers both move a job. */
export function expireUnfenced(): KyselyPlugin {
  return rewritePlugin({
    update: (n) => (hasPredicate(n.where, LEASE_EXPIRED) ? { ...n, where: stripWhere(n.where, [STATE_IN, LEASE_TOKEN, LEASE_EXPIRED]) } : n),
  });
}

const LAST_TICK_BEFORE: PredicateShape = { column: "last_tick", operator: "<" };
/** Race mutant (cron): a schedule's tick write loses its compare-and-set (`last_tick < tick`), so every pass that saw a tick due fires it. */
export function tickUnfenced(): KyselyPlugin {
  return rewritePlugin({
    update: (n) => (tableName(n.table).endsWith("schedules") && hasPredicate(n.where, LAST_TICK_BEFORE) ? { ...n, where: stripWhere(n.where, [LAST_TICK_BEFORE]) } : n),
  });
}

/** Race mutant: the engine's units of work run their statements in autocommit, so nothing they lock or write is held together. */
export function engineWithoutTransactions(engine: Engine): Engine {
  return { ...engine, writeTransaction: (db, fn) => fn(db), writeStatement: (db, fn) => fn(db) };
}

const everywhere = () => true;

// ---------------------------------------------------------------- the mutations

export const MUTATIONS: readonly Mutation[] = [
  {
    id: "cancel-any-state",
    description: "cancel's UPDATE without `state IN (scheduled, ready, blocked, running)`: cancels finished jobs",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({ update: (n) => (setsState(n) === "cancelled" ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n) }),
    ],
  },
  {
    id: "claim-any-state",
    description: "claim without its state predicate (in the candidate SELECT and the UPDATE): claims running and finished jobs",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({
        select: (n) => (isClaimSelect(n) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
        update: (n) => (isClaimUpdate(n) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
      }),
    ],
  },
  {
    id: "stage-not-due",
    description:
      "staging (which every claim runs first) without the `run_at <= now` fence: a job scheduled in the future is admitted, then claimed " +
      "(replaces claim-not-due: claim itself is ready → running now, the due fence moved to staging)",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({
        select: (n) => (isStageSelect(n) ? { ...n, where: stripWhere(n.where, [DUE]) } : n),
        update: (n) => (isStageUpdate(n) ? { ...n, where: stripWhere(n.where, [DUE]) } : n),
      }),
    ],
  },
  {
    id: "claim-unlocked-no-recheck",
    description:
      "claim without its row lock (`FOR UPDATE SKIP LOCKED` dropped) AND without the UPDATE's state re-check " +
      "(either alone is backed by the other: the re-check after a lock wait, or the lock): two claimers take the same job",
    appliesTo: (a) => a.skipLocked,
    concurrentOnly: "alone, a claim's SELECT and UPDATE see the same state: only a second claimer between them takes the job twice",
    notApplicableBecause: "SQLite has no row locks: its single writer (BEGIN IMMEDIATE + the process write queue) serializes every claim",
    plugins: () => [
      rewritePlugin({
        select: (n) => (isClaimSelect(n) ? withoutRowLocks(n) : n),
        update: (n) => (isClaimUpdate(n) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
      }),
    ],
  },
  {
    id: "lease-token-unchecked",
    description: "heartbeat/complete/fail/release without `lease_token = ?`: a worker whose lease expired and was re-claimed still writes",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({ update: (n) => (hasPredicate(n.where, LEASE_EXPIRED) ? n : { ...n, where: stripWhere(n.where, [LEASE_TOKEN]) }) }),
    ],
  },
  {
    id: "expire-ignores-expiry",
    description: "the sweeper's expire without `lease_expires_at <= now`: a lease renewed by a heartbeat after listExpired is reclaimed anyway",
    appliesTo: everywhere,
    concurrentOnly: "the model's sweep lists and expires in one go: only a heartbeat between them renews a listed lease",
    plugins: () => [rewritePlugin({ update: (n) => ({ ...n, where: stripWhere(n.where, [LEASE_EXPIRED]) }) })],
  },
  {
    id: "no-transactions",
    description:
      "begin/commit/rollback become no-ops: a multi-statement primitive (UPDATE then read-back; claim's SELECT, UPDATE, SELECT) " +
      "is no longer atomic, so it returns rows another worker wrote in between",
    appliesTo: (a) => !a.returning,
    concurrentOnly: "a transaction only matters when another session's statement lands between two of the primitive's",
    notApplicableBecause:
      "with RETURNING (PostgreSQL, SQLite) every primitive is one statement, atomic without a transaction; SQLite's write queue is in the engine, not the driver",
    wrapDialect: withoutTransactions,
  },
  {
    id: "admission-unlocked",
    description:
      "admission without the key's lock: the key-lock SELECT loses `FOR UPDATE` AND the enqueue's key upsert no longer locks the row " +
      "(PostgreSQL `ON CONFLICT DO NOTHING`, MySQL `INSERT IGNORE`, which only takes a shared lock): two writers count the same free slot",
    appliesTo: (a) => a.skipLocked,
    notApplicableBecause: "SQLite's single writer serializes every admission; there is no row lock to remove",
    schedulesOnly: "a non-locking upsert can no longer change a stored limit, which the model test (limits vary per enqueue) would flag for that reason",
    plugins: () => [
      rewritePlugin({
        select: (n) => (isKeyLock(n) ? withoutRowLocks(n) : n),
        insert: (n) => {
          if (!isTable(tableName(n.into), "concurrency_keys")) return n;
          if (n.onConflict) return { ...n, onConflict: { ...n.onConflict, updates: undefined, doNothing: true } };
          if (n.onDuplicateKey) return { ...n, onDuplicateKey: undefined, orAction: OrActionNode.create("ignore") };
          return n;
        },
      }),
    ],
  },
  {
    id: "rebalance-skipped",
    description:
      "a write that frees a slot (complete, fail, expire, cancel) no longer sees the job's key, so it neither locks nor rebalances it: " +
      "the freed slot is not given to the next blocked job (lost wakeup)",
    appliesTo: everywhere,
    plugins: () => [rewritePlugin({ select: (n) => (isFreeingKeyRead(n) ? noRows(n) : n) })],
  },
  {
    id: "promotion-skipped",
    description:
      "the bulk promotion (an outcome batch whose keys the worker knows, a keyed enqueueMany) reads no blocked jobs: " +
      "a slot freed by a batched outcome is not given to the key's next blocked job (lost wakeup)",
    appliesTo: everywhere,
    plugins: () => [rewritePlugin({ select: (n) => (isBlockedRead(n) ? noRows(n) : n) })],
  },
  {
    id: "cap-unchecked",
    description: "a cap's count of running jobs reads nothing (0): a claim takes up to the cap more jobs however many already run",
    appliesTo: everywhere,
    plugins: () => [rewritePlugin({ select: (n) => (isRunningCount(n) ? noRows(n) : n) })],
  },
  {
    id: "cap-unlocked",
    description:
      "claim reads the queue and task control rows without `FOR UPDATE`: concurrent claims each count the same room and together exceed the cap",
    appliesTo: (a) => a.skipLocked,
    concurrentOnly: "one claimer's count is always right: only a second claimer counting the same room exceeds the cap",
    notApplicableBecause: "SQLite's single writer serializes every claim; there is no row lock to remove",
    plugins: () => [rewritePlugin({ select: (n) => (isControlRead(n) ? withoutRowLocks(n) : n) })],
  },
  {
    id: "rate-log-unwritten",
    description: "a claim's rewrite of a rate limit's log of starts writes an empty log: every later claim finds the whole limit free",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({
        update: (n) =>
          updatesColumn(n, "rate_starts")
            ? { ...n, updates: n.updates?.map((u) => (columnName(u.column) === "rate_starts" ? { ...u, value: ValueNode.createImmediate(null) } : u)) }
            : n,
      }),
    ],
  },
  {
    id: "rate-key-unlocked",
    description: "claim reads its rate keys' rows (limit and log of starts) without `FOR UPDATE`: concurrent claims each read the same log and both take its last start",
    appliesTo: (a) => a.skipLocked,
    concurrentOnly: "one claimer's read of the log is always right: only a second claimer reading the same log exceeds the limit",
    notApplicableBecause: "SQLite's single writer serializes every claim; there is no row lock to remove",
    plugins: () => [rewritePlugin({ select: (n) => (isTable(fromTable(n), "rate_keys") ? withoutRowLocks(n) : n) })],
  },
  {
    id: "paused-claimed",
    description: "claim reads every queue as not paused (`0 AS paused`): paused queues are claimed",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({
        select: (n) =>
          isControlRead(n) && isTable(fromTable(n), "queues")
            ? {
                ...n,
                selections: n.selections?.map((s) =>
                  columnName(s.selection as OperationNode) === "paused"
                    ? SelectionNode.create(AliasNode.create(ValueNode.createImmediate(0), IdentifierNode.create("paused")))
                    : s,
                ),
              }
            : n,
      }),
    ],
  },
  {
    id: "idempotency-holder-unread",
    description:
      "an enqueue with an idempotency key never finds the key's holder (its lookup reads nothing): a held key makes the enqueue fail " +
      "instead of returning the holder with created false",
    appliesTo: everywhere,
    plugins: () => [rewritePlugin({ select: (n) => (isTable(fromTable(n), "jobs") && hasPredicate(n.where, IDEMPOTENCY_EQ) ? noRows(n) : n) })],
  },
  {
    id: "replay-dead-any-state",
    description: "replay without its state predicate (bulk replay's pick, and the replay UPDATE of single and bulk replays): finished jobs that are not dead are replayed",
    appliesTo: everywhere,
    plugins: () => [
      rewritePlugin({
        select: (n) => (isDeadPick(n) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
        update: (n) => (isReplayUpdate(n) ? { ...n, where: stripWhere(n.where, [STATE_IN]) } : n),
      }),
    ],
  },
  {
    id: "idempotency-conflict-unhandled",
    description:
      "an enqueue that meets a key another transaction just took fails on the key's uniqueness instead of returning the holder: " +
      "the jobs INSERT loses `ON CONFLICT DO NOTHING` (PostgreSQL) and the engine no longer recognises a duplicate key (MySQL)",
    appliesTo: (a) => a.skipLocked,
    concurrentOnly: "alone, an enqueue finds a held key's holder before it inserts: only a holder committed in between meets the insert",
    notApplicableBecause: "SQLite's single writer runs the holder lookup and the insert of one enqueue with no other writer between them",
    plugins: idempotencyConflictsUnhandled.plugins,
    wrapEngine: idempotencyConflictsUnhandled.wrapEngine,
  },
  {
    id: "fair-order-ignored",
    description:
      "a fair queue's claims ignore its jobs' tags (`ORDER BY fair_tag` dropped: they take its jobs by id), so a key that enqueued first takes every slot until its jobs run out (R21)",
    appliesTo: () => true,
    plugins: () => [fairOrderIgnored()],
  },
  {
    id: "replay-unlocked-unguarded",
    description: "bulk replay picks dead jobs without locking them (`FOR UPDATE SKIP LOCKED` dropped) and replays them without `state IN (dead)`: two replays both replay a job",
    appliesTo: (a) => a.skipLocked,
    concurrentOnly: "alone, a replay picks only dead jobs and nothing changes them before its update: only a second replay in between replays one twice",
    notApplicableBecause: "SQLite's single writer runs one replay's pick and update with no other writer between them",
    plugins: () => [replayUnlockedUnguarded()],
  },
  {
    id: "debounce-unguarded",
    description:
      "a debounced enqueue finds its key's job in any state and unlocked (no `state IN (pending)`, no `FOR UPDATE`; MariaDB: " +
      "`debounce_key` instead of the pending-only column) and merges without the state guard: a burst after the claim merges into " +
      "the running (or finished) job and is lost (R22)",
    appliesTo: everywhere,
    plugins: () => [debounceUnguarded()],
  },
  {
    id: "children-never-released",
    description: "a parent's success writes none of its waiting children's counts (its UPDATE matches no row): no child is ever released (I15)",
    appliesTo: everywhere,
    plugins: () => [rewritePlugin({ update: (n) => (isUnwaitUpdate(n) ? writesNothing(n) : n) })],
  },
  {
    id: "children-never-cancelled",
    description: "a parent that ends dead or cancelled finds none of its waiting descendants (the cascade's locked pick returns no row): they wait forever (I15)",
    appliesTo: everywhere,
    plugins: () => [rewritePlugin({ select: (n) => (isCascadePick(n) ? noRows(n) : n) })],
  },
  {
    id: "childless-fence-dropped",
    description: "writes that end jobs without settling children lose `has_children = 0`: the fast paths end a parent and its children are never released or cancelled (I15, R23 enqueue)",
    appliesTo: everywhere,
    plugins: () => [childlessFenceDropped()],
  },
  {
    id: "wait-counts-unlocked",
    description: "a parent's success reads its children's counts without their row locks (`FOR UPDATE` dropped) and writes what it read less one: two parents at once both write 1, and the child is never released (R23)",
    appliesTo: (a) => a.skipLocked && a.returning,
    notApplicableBecause:
      "on SQLite the release is one UPDATE … FROM … RETURNING under the single writer, on MariaDB one UPDATE … JOIN whose write reads each child's newest row under its lock: there is no separate locked read of the counts to unlock",
    concurrentOnly: "alone, a read and its write see the same count: only a second parent's success between them loses a decrement",
    plugins: () => [waitCountsUnlocked()],
  },
];

/** A parent's success's write of its waiting children's counts (kysely/dependencies.ts `releaseInOne`, `releaseJoined`): it sets `waiting_on`, not `finished_at` (the cascade's cancel sets both). */
const isUnwaitUpdate = (n: UpdateQueryNode) => updatesColumn(n, "waiting_on") && !updatesColumn(n, "finished_at");
/** `WHERE 1 = 0`: the UPDATE writes no row. */
const writesNothing = (n: UpdateQueryNode): UpdateQueryNode => ({ ...n, where: WhereNode.create(RawNode.createWithSql("1 = 0")) });
/** The cascade's locked pick of waiting children: `SELECT id FROM jobs WHERE id IN (…) AND state = 'waiting'` (kysely/dependencies.ts `cascade`). */
function isCascadePick(n: SelectQueryNode): boolean {
  return isTable(fromTable(n), "jobs") && selectsOnly(n, "id") && hasPredicate(n.where, ID_IN) && hasPredicate(n.where, STATE_EQ);
}

export function mutationById(id: string): Mutation {
  const m = MUTATIONS.find((x) => x.id === id);
  if (!m) throw new Error(`unknown mutation ${id}; known: ${MUTATIONS.map((x) => x.id).join(", ")}`);
  return m;
}
