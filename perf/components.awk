# Where a relay's (or moq-floor's) CPU samples go, by component: shared by perf/flamegraph.sh
# and perf/accounting.sh. Input: folded stacks (inferno-collapse-perf --kernel: frames joined
# by ";", kernel frames suffixed "_[k]", the sample count last). Each sample goes to the first
# component met walking up from its leaf frame ("self": std/core/hashbrown code and memcpy
# count for the component that called them; kernel samples for the system call they are
# under); "in stack" counts the samples with a frame of that component anywhere in the stack.
# quiche is split by what it was doing: receiving (ACK processing, frames), building packets
# (send), or the rest (stream writes, timers, statistics).
# Output lines: self-samples in-stack-samples total-samples <TAB> component.
function user(f) {
    if (f ~ /^<?quiche::/) return "quiche (all of it)"
    if (f ~ /^<?relay::/) return "relay (src/relay)"
    if (f ~ /^<?(session|moqt|wire|webtransport|qmux)::/) return "session, moqt, wire (src/session, src/moqt, src/wire)"
    if (f ~ /^<?moq_edge::/) return "host glue (src/host)"
    if (f ~ /^<?(runtime|glommio)::/) return "runtime: glommio executor, shard loop, I/O"
    if (f ~ /^(aes|_aesni|aesni|gcm_|EVP_|CRYPTO_|OPENSSL_|bssl::|BORINGSSL|sha256|SHA256|HMAC|x25519|X25519|fiat_|mlkem|MLKEM|keccak|chacha|ChaCha|poly1305|ec_|p256|ECDSA|BN_|bn_|ring_core|<?ring::)/) return "crypto (BoringSSL, ring)"
    if (f ~ /^_?mi_|^mi_/) return "allocator (mimalloc)"
    return ""
}
function kernel(f) {
    if (f ~ /sendmsg|sendmmsg|udp_send/) return "kernel: UDP send"
    if (f ~ /recvmsg|recvmmsg|udp_recv/) return "kernel: UDP receive"
    if (f ~ /io_uring|io_cqring|io_submit/) return "kernel: io_uring wait and submit"
    if (f ~ /page_fault/) return "kernel: page faults"
    return ""
}
function cls(f) { return (f ~ /_\[k\]$/) ? kernel(f) : user(f) }
{
    n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
    k = split(stack, fr, ";"); total += n
    self = ""
    for (i = k; i >= 2 && self == ""; i--) self = cls(fr[i])
    if (self == "") self = (fr[k] ~ /_\[k\]$/) ? "kernel: other (scheduler, timers, interrupts)" : "other (libc, std, unresolved)"
    if (self == "quiche (all of it)") {
        if (stack ~ /quiche::Connection<F>::recv/) self = "quiche: receive (ACK processing, frames)"
        else if (stack ~ /quiche::Connection<F>::send/) self = "quiche: packet building (send)"
        else self = "quiche: streams, timers, statistics"
    }
    s[self] += n
    delete seen
    for (i = 2; i <= k; i++) { c = cls(fr[i]); if (c != "" && !(c in seen)) { seen[c] = 1; in_stack[c] += n } }
}
END {
    for (c in s) names[c] = 1
    for (c in in_stack) names[c] = 1
    for (c in names) printf "%.0f %.0f %.0f\t%s\n", s[c], (c in in_stack) ? in_stack[c] : -1, total, c
}
