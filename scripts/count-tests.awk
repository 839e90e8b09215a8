# Sums the results of `cargo test` and pytest runs in one log: every test binary's own
# "test result:" line (a child process's, printed inside its parent's section before
# the parent's own, is not counted twice), every doctest run, pytest's summary line.
# A Rust test that skipped (iox_testkit::skip, which appends "<test>\t<reason>" to the
# file IOX_SKIP_LOG names) returned early and libtest counted it as passed: each one
# named in `skiplog` is moved from passed to skipped; pytest counts its skips itself.
# Prints the skipped tests with their reasons, then "ci: N passed, S skipped, M failed"
# (and, on stderr, how many child lines it skipped).
# Used by .ci/run and scripts/test.sh: awk -v skiplog=FILE -f scripts/count-tests.awk LOG
function take(line,   w, n, i) {
    n = split(line, w, /[ ;,]+/)
    for (i = 1; i < n; i++) {
        if (w[i + 1] == "passed") p += w[i]
        if (w[i + 1] == "failed") f += w[i]
        if (w[i + 1] == "skipped") s += w[i]
    }
}
{ gsub(/\033\[[0-9;]*m/, "") }
/^(=+ )?[0-9]+ (passed|failed|skipped)[ ,].* in [0-9.]+s/ { take($0); next }
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
    if (skiplog != "") {
        while ((getline entry < skiplog) > 0) {
            split(entry, field, "\t")
            if (field[1] in seen) continue
            seen[field[1]] = 1
            rust++
            printf "ci: skipped %s: %s\n", field[1], field[2]
        }
    }
    printf "ci: %d passed, %d skipped, %d failed\n", p - rust, s + rust, f
}
