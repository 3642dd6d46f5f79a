/** What a dashboard request may do: view pages, or one of the mutations. */
export type DashboardAction = "view" | "pause" | "resume" | "replay" | "replay-all" | "cancel" | "run-now" | "delete" | "run-schedule";

/** The mutations, in the order their permissions are asked (every page asks `authorize` for each, to show only allowed buttons). */
export const MUTATIONS: readonly DashboardAction[] = ["pause", "resume", "replay", "replay-all", "cancel", "run-now", "delete", "run-schedule"];
