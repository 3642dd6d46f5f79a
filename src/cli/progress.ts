/** A one-line progress bar on stderr when it is a terminal (a count alone when the total is unknown, null); silent otherwise (and under --json). */
export class Progress {
  #shown = false;
  constructor(
    readonly label: string,
    readonly total: number | null,
    readonly enabled: boolean = Boolean(process.stderr.isTTY),
  ) {}

  update(done: number): void {
    if (!this.enabled) return;
    if (this.total === null) {
      process.stderr.write(`\r${this.label} ${done}`);
      this.#shown = true;
      return;
    }
    if (this.total <= 0) return;
    const width = 30;
    const filled = Math.min(width, Math.round((done / this.total) * width));
    process.stderr.write(`\r${this.label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${this.total}`);
    this.#shown = true;
  }

  done(): void {
    if (this.#shown) process.stderr.write("\n");
  }
}
