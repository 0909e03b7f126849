"""tools/benchmark_upgrade.py: its pure helpers (the next patch release,
the wave lines, the comparison against the issue's target)."""

import pytest

from tools import benchmark_upgrade


def run(seconds, load, wave_size, cores=2):
    return {'seconds': seconds, 'load': load, 'wave_size': wave_size,
            'busy': seconds * load * cores}


def test_next_patch_keeps_the_minor_and_the_revision():
    assert benchmark_upgrade.next_patch('1.36.1-1.1') == '1.36.2-1.1'
    assert benchmark_upgrade.next_patch('1.36.9-2.3') == '1.36.10-2.3'


def test_a_wave_line_names_its_nodes_time_load_and_slowest_node():
    rows = benchmark_upgrade.wave_rows([
        (('master1',), 'apply', 12.4, 0.5, 12.0),
        (('worker1', 'worker2', 'worker3'), 'worker', 20.0, 0.98, 19.5)])
    assert rows[0].split() == ['wave', '1', 'apply', 'master1', '12.4', 's',
                               'load', '50%', 'slowest', 'node', '12.0', 's']
    assert rows[1].split()[:8] == ['wave', '2', 'worker', '3', 'Workers',
                                   '(worker1..worker3)', '20.0', 's']
    assert rows[1].split()[8:10] == ['load', '98%']


@pytest.mark.parametrize('workers,one,waves,ok,cpu_bound', [
    # under a third of the one-at-a-time time
    (32, run(300, 0.5, 1), run(90, 0.5, 3), True, False),
    # a third or more, not CPU-bound: missed
    (32, run(300, 0.5, 1), run(120, 0.6, 3), False, False),
    # CPU-bound at 1.1 times the floor (load 91 %)
    (32, run(300, 0.5, 1), run(150, 1 / 1.1, 3), True, True),
    # CPU-bound, but 1.25 times the floor (load 80 % is not CPU-bound)
    (32, run(300, 0.5, 1), run(150, 0.8, 3), False, False),
])
def test_the_target_is_a_third_or_the_cpu_bound_floor(workers, one, waves,
                                                      ok, cpu_bound):
    verdict = benchmark_upgrade.judge(workers, one, waves, 2)
    assert verdict['ok'] is ok
    assert verdict['cpu_bound'] is cpu_bound
    assert verdict['checked']
    assert verdict['floor'] == pytest.approx(waves['seconds'] *
                                             waves['load'])
    assert verdict['ratio'] == pytest.approx(waves['seconds'] / 300)


def test_the_ideal_ratio_counts_the_waves_and_small_clusters_are_not_judged():
    verdict = benchmark_upgrade.judge(32, run(300, 0.5, 1), run(90, 0.5, 3),
                                      2)
    assert verdict['ideal'] == pytest.approx(11 / 32)
    small = benchmark_upgrade.judge(8, run(100, 0.5, 1), run(90, 0.5, 1), 2)
    assert not small['checked'] and not small['ok']
    assert small['ideal'] == 1.0
    lines = benchmark_upgrade.verdict_lines(small)
    assert len(lines) == 2 and 'not CPU-bound' in lines[1]
    assert benchmark_upgrade.verdict_lines(verdict)[-1].split() == [
        'target:', 'ok']


def test_the_workers_part_sums_the_worker_waves_only():
    result = {'waves': [(('master1',), 'apply', 10.0, 0.5, 10.0),
                        (('worker1', 'worker2'), 'worker', 7.5, 0.5, 7.0),
                        (('worker3',), 'uncordon', 1.0, 0.5, 1.0)]}
    assert benchmark_upgrade.workers_seconds(result) == 8.5
