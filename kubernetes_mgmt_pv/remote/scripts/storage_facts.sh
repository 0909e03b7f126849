# The storage server's facts. Arguments: number of volumes, (by-id link
# or '', device, mount_to) per volume, number of packages, the packages,
# the fstab and exports files, export directories.
#
# `regions DEVICE` prints its size, then whether its first and last MiB
# (where a GPT keeps its backup) are all zeros: "<region> zero|data|
# unreadable" per region. Data that blkid knows no signature of (a raw
# tar stream, an unknown format) is found here.
region() {
    if dd if="$2" bs=65536 iflag=skip_bytes,count_bytes skip="$3" \
            count="$4" status=none | cmp -s -n "$4" - /dev/zero; then
        echo "$1 zero"
    elif dd if="$2" of=/dev/null bs=65536 iflag=skip_bytes,count_bytes \
            skip="$3" count="$4" status=none; then
        echo "$1 data"
    else
        echo "$1 unreadable"
    fi
}
regions() {
    size=$(blockdev --getsize64 "$1") || return 1
    length=$((size < 1048576 ? size : 1048576))
    echo "size $size"
    region first "$1" 0 "$length"
    region last "$1" $((size - length)) "$length"
}
count=$1
shift
volume=0
while [ "$volume" -lt "$count" ]; do
    link=$1 device=$2 mount_to=$3
    shift 3
    if [ -n "$link" ]; then
        fact "link $volume" readlink -e -- "$link"
        if [ -e "$link" ]; then device=$link; fi
    fi
    fact "stat $volume" stat -L --printf '%n\t%Hr:%Lr\t%f\n' -- \
        "$device" "$mount_to"
    if [ -d "$mount_to" ]; then
        fact "entry $volume" find -H "$mount_to" -mindepth 1 -maxdepth 1 \
            -printf '%P\0' -quit
    fi
    fact "probe $volume" blkid -p -o export -- "$device"
    fact "regions $volume" regions "$device"
    volume=$((volume + 1))
done
fact mounts findmnt -r -n -o TARGET,MAJ:MIN
count=$1
shift
while [ "$count" -gt 0 ]; do
    fact "package $1" dpkg-query -W -f="\${Status}" "$1"
    shift
    count=$((count - 1))
done
for file in "$1" "$2"; do
    if [ -e "$file" ]; then fact "file $file" cat -- "$file"; fi
done
shift 2
if [ "$#" -gt 0 ]; then
    fact directories stat -L --printf '%n\t%Hd:%Ld\t%U:%G\n' -- "$@"
fi
if command -v exportfs >/dev/null; then fact exportfs exportfs -v; fi
