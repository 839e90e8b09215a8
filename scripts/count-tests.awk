# Sums the results of `cargo test` and pytest runs in one log: every test binary's own
# "test result:" line (a child process's, printed inside its parent's section before
# the parent's own, is not counted twice), every doctest run, pytest's summary line.
# Prints "ci: N passed, M failed" (and, on stderr, how many child lines it skipped).
# Used by .ci/run and scripts/test.sh: awk -f scripts/count-tests.awk LOG
function take(line,   w, n, i) {
    n = split(line, w, /[ ;,]+/)
    for (i = 1; i < n; i++) {
        if (w[i + 1] == "passed") p += w[i]
        if (w[i + 1] == "failed") f += w[i]
    }
}
{ gsub(/\033\[[0-9;]*m/, "") }
/^(=+ )?[0-9]+ (passed|failed)[ ,].* in [0-9.]+s/ { take($0); next }
/^ +(Running|Doc-tests) / {
    if (last != "") take(last)
    last = ""; doc = ($1 == "Doc-tests"); next
}
/^test result: / {
    if (doc) take($0)
    else { if (last != "") children++; last = $0 }
}
END {
    if (last != "") take(last)
    if (children) printf "ci: %d result line(s) of child processes not counted\n", children > "/dev/stderr"
    printf "ci: %d passed, %d failed\n", p, f
}