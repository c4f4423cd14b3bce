package inputwait

// legacyCalls: arm64 has only the general forms (ppoll, pselect6,
// epoll_pwait) that every architecture has.
var legacyCalls = map[int]call{}

const unknownArch = false
