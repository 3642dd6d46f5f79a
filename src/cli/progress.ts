/** A one-line progress bar on stderr when it is a terminal; silent otherwise (and under --json). */
export class Progress {
  #shown = false;
  constructor(
    readonly label: string,
    readonly total: number,
    readonly enabled: boolean = Boolean(process.stderr.isTTY),
  ) {}

  update(done: number): void {
    if (!this.enabled || this.total <= 0) return;
    const width = 30;
    const filled = Math.min(width, Math.round((done / this.total) * width));
    process.stderr.write(`\r${this.label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${done}/${this.total}`);
    this.#shown = true;
  }

  done(): void {
    if (this.#shown) process.stderr.write("\n");
  }
}
