# Waits until a daemon runs (or is gone); after running.sh. Arguments:
# running|stopped, name, pid file, how many more looks, seconds between
# two looks.
want=$1 name=$2 pidfile=$3 tries=$4 pause=$5
while :; do
    if running "$name" "$pidfile" >/dev/null; then state=running
    else state=stopped; fi
    if [ "$state" = "$want" ]; then exit 0; fi
    if [ "$tries" -le 0 ]; then
        echo "$name is still $state (pid file $pidfile)" >&2
        exit 1
    fi
    tries=$((tries - 1))
    sleep "$pause"
done
