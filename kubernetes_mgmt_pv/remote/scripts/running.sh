# `running NAME PIDFILE` prints the daemon's PID and succeeds when the
# first line of its pid file is the PID of a live process named NAME.
running() {
    pid=$(head -n 1 -- "$2" 2>/dev/null) || return 1
    case $pid in ''|*[!0-9]*) return 1 ;; esac
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] || return 1
    echo "$pid"
}
