#!/usr/bin/env python3
"""jinja_goldens.py -- render the template cases below with real Jinja2, configured exactly as
Hugging Face transformers renders chat templates (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, HF's tojson / raise_exception / strftime_now), and write
tests/data/jinja-cases.json: {"cases": [{"name", "template", "vars", "out" | "error"}]}.
tests/unit/test_jinja_cases.c checks the C engine against that file.

usage: python3 tools/jinja_goldens.py > tests/data/jinja-cases.json   (needs Jinja2 3.1)
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return "2026-01-02"  # cases only use a fixed-output format check below

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


V = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi <b>there</b>"},
        {"role": "assistant", "content": "Hello!", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1, "y": "é\n\"q\""}}}]},
        {"role": "tool", "content": "42"},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "Does f.",
               "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}],
    "n": 7, "f": 2.5, "big": 1e20, "small": 1e-7, "neg": -3, "t": True, "fa": False, "nil": None,
    "s": "  Hello World  ", "u": "héllo wörld ß ǆ", "words": ["b", "A", "c", "a"], "nums": [3, 1, 2, 1],
    "d": {"b": 2, "a": 1, "items": "shadow"}, "empty": [], "emptys": "",
}

CASES = [
    # whitespace control and HF's trim_blocks + lstrip_blocks
    ("trim_blocks", "{% if t %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "a\n    {% if t %}\n    x\n    {% endif %}\nb", {}),
    ("lstrip_not_vars", "a\n    {{ n }}\n  {% if t %}z{% endif %}", {}),
    ("minus_strip", "a   {%- if t -%}   b   {%- endif -%}   c", {}),
    ("var_minus", "x  {{- n -}}  y", {}),
    ("plus_keeps", "a\n    {%+ if t +%}\nb{% endif %}", {}),
    ("comment", "a {# hidden #}\nb\n  {# c2 -#}   \nc {#- x #} d", {}),
    ("trailing_newline_dropped", "x\n", {}),
    ("crlf", "a\r\nb{% if t %}\r\nc{% endif %}", {}),
    ("raw", "{% raw %}{{ not }} {% evaluated %}{% endraw %}\nz", {}),
    ("raw_strip", "a  {%- raw -%}  {{x}}  {%- endraw -%}  b", {}),
    ("tag_line_start_after_var", "{{ n }}  {% if t %}x{% endif %}", {}),
    # literals and printing
    ("literals", "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1e3 }} {{ 0x1f }} {{ 1_000 }} {{ true }} {{ False }} {{ none }} {{ None }}", {}),
    ("float_repr", "{{ f }} {{ big }} {{ small }} {{ 1/3 }} {{ 2.0 }} {{ 1e16 }} {{ 123456789.0 * 1000 }} {{ 0.1 + 0.2 }}", {}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\x41\\u00e9\\101' }}|{{ \"q\\\"x\" }}|{{ 'a' 'b' }}", {}),
    ("print_list", "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}", {}),
    ("print_tuple", "{{ (1,) }} {{ (1, 2) }} {{ () }}", {}),
    ("print_dict", "{{ d }} {{ {} }}", {}),
    ("repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n', 'é'] }}", {}),
    ("undefined_prints_empty", "[{{ nope }}][{{ d.nope }}][{{ messages[99] }}]", {}),
    # operators
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 1 ~ (2 + 3) }} {{ 'a' ~ 1 ~ none }}", {}),
    ("concat_add", "{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 'ab' * 3 }} {{ [0] * 2 }} {{ 3 * 'x' }}", {}),
    ("compare", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'b' }} {{ none == none }}", {}),
    ("in_ops", "{{ 'ell' in 'hello' }} {{ 2 in [1,2] }} {{ 'a' in d }} {{ 'z' not in d }} {{ 3 not in nums }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ none or [] }} {{ '' and 1 }} {{ not nope }}", {}),
    ("ternary", "{{ 'y' if t else 'n' }} {{ 'y' if fa else 'n' }} [{{ 'y' if fa }}] {{ 1 if fa else 2 if t else 3 }}", {}),
    ("not_is", "{{ not nope is defined }} {{ not n is defined }}", {}),
    # tests
    ("tests_types", "{{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ t is integer }} {{ f is float }} {{ s is string }} {{ d is mapping }} {{ words is mapping }} {{ nil is none }} {{ nope is none }} {{ t is boolean }} {{ n is boolean }}", {}),
    ("tests_iter", "{{ s is iterable }} {{ words is iterable }} {{ d is iterable }} {{ n is iterable }} {{ nope is iterable }} {{ words is sequence }} {{ d is sequence }} {{ n is sequence }}", {}),
    ("tests_values", "{{ t is true }} {{ 1 is true }} {{ fa is false }} {{ 0 is false }} {{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 'a' is equalto 'a' }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 2 is ne 2 }} {{ 2 is in nums }}", {}),
    ("tests_defined", "{{ n is defined }} {{ nope is defined }} {{ nope is undefined }} {{ d.a is defined }} {{ d.zz is defined }} {{ messages[0].role is defined }} {{ messages[0].name is defined }}", {}),
    ("tests_callable_case", "{{ range is callable }} {{ n is callable }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aB' is lower }} {{ s.strip is callable }}", {}),
    ("is_not", "{{ n is not none }} {{ nil is not none }} {{ n is not string }}", {}),
    # attribute / item access
    ("getattr_item", "{{ messages[0].role }} {{ messages[0]['content'] }} {{ messages.0.role }} {{ messages[-1].content }} {{ d['a'] }} {{ d.a }}", {}),
    ("dict_method_shadow", "{{ d['items'] }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }}", {}),
    ("slicing", "{{ nums[1:] }} {{ nums[:2] }} {{ nums[::-1] }} {{ nums[::2] }} {{ nums[-2:] }} {{ 'hello'[1:3] }} {{ 'héllo'[::-1] }} {{ nums[5:] }} {{ nums[1:-1] }} {{ 'abc'[-1] }} {{ u[1] }}", {}),
    ("none_attr_undefined", "[{{ nil.foo }}][{{ n.foo }}][{{ nil['x'] }}]", {}),
    # for loops
    ("for_loop_vars", "{% for x in words %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ x }};{% endfor %}", {}),
    ("for_prev_next", "{% for x in nums %}[{{ loop.previtem }}|{{ x }}|{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_else", "{% for x in empty %}x{% else %}empty{% endfor %} {% for x in nope %}x{% else %}undef-empty{% endfor %}", {}),
    ("for_filter", "{% for x in nums if x > 1 %}{{ x }}{{ loop.index }}{{ loop.length }} {% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {}),
    ("for_dict_keys", "{% for k in d %}{{ k }},{% endfor %}", {}),
    ("for_string", "{% for ch in 'héy' %}[{{ ch }}]{% endfor %}", {}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("for_scope", "{% set c = 0 %}{% for x in nums %}{% set c = c + x %}{{ c }},{% endfor %}{{ c }}", {}),
    ("for_cycle_changed", "{% for x in [1,1,2] %}{{ loop.cycle('a','b') }}{{ loop.changed(x) }} {% endfor %}", {}),
    ("reversed_messages", "{% for m in messages[::-1] %}{{ (messages|length - 1) - loop.index0 }}{{ m.role }} {% endfor %}", {}),
    # set / namespace / macro / call / filter blocks / with
    ("set_forms", "{% set a = 1 %}{% set b, c = 2, 3 %}{% set t2 = 4, 5 %}{{ a }}{{ b }}{{ c }}{{ t2 }}", {}),
    ("set_block", "{% set x %}  block {{ n }} {% endset %}[{{ x }}]{% set y | upper | trim %} shout {% endset %}[{{ y }}]", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% if m.role == 'tool' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", {}),
    ("namespace_dict_arg", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}", {}),
    ("macro", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }}", {}),
    ("macro_varargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
    ("macro_scope", "{% set g = 'G' %}{% macro m() %}{{ g }}{% set g = 'L' %}{{ g }}{% endmacro %}{{ m() }}{{ g }}", {}),
    ("macro_recursion", "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * (fact(k - 1) | int) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inside {{ n }}{% endcall %}", {}),
    ("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1,2]) %}[{{ item }}]{% endcall %}", {}),
    ("filter_block", "{% filter upper %}abc {{ 'def' }}{% endfilter %}", {}),
    ("with_block", "{% with a = 1, b = n %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("if_elif", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %}", {}),
    # filters
    ("tojson", "{{ tools | tojson }}|{{ messages[2].tool_calls[0].function.arguments | tojson }}|{{ 'é' | tojson }}|{{ [1.0, 2.5, none, true] | tojson }}", {}),
    ("tojson_indent", "{{ d | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}|{{ {'a': [1, {'b': none}]} | tojson(indent=4) }}", {}),
    ("tojson_options", "{{ d | tojson(sort_keys=true) }}|{{ 'é<>&' | tojson(ensure_ascii=true) }}|{{ [1, 2] | tojson(separators=(',', ':')) }}|{{ {1: 2, none: 3, true: 4} | tojson }}", {}),
    ("tojson_control_chars", "{{ 'a\\u0001b\\u007f\\u2028' | tojson }}", {}),
    ("trim_etc", "[{{ s | trim }}] [{{ 'xxhixx' | trim('x') }}] {{ s | length }} {{ words | count }} {{ d | length }} {{ nope | length }}", {}),
    ("case_filters", "{{ 'hello wORLD' | upper }} {{ 'HeLLo' | lower }} {{ 'hello wORLD' | capitalize }} {{ 'hello wORLD-foo (bar)' | title }} {{ u | upper }}", {}),
    ("join_filters", "{{ words | join }} {{ words | join(', ') }} {{ nums | join('-') }} {{ messages | join('|', attribute='role') }}", {}),
    ("replace_filter", "{{ 'a-b-c' | replace('-', '+') }} {{ 'a-b-c' | replace('-', '', 1) }} {{ 'ab' | replace('', '.') }}", {}),
    ("default_filter", "{{ nope | default('dv') }} {{ n | default('dv') }} {{ emptys | default('dv') }} {{ emptys | default('dv', true) }} {{ nope | d('x') }} {{ nil | default('dv') }}", {}),
    ("first_last", "{{ words | first }} {{ words | last }} {{ 'abc' | first }} {{ 'abc' | last }} [{{ empty | first }}]", {}),
    ("map_filter", "{{ messages | map(attribute='role') | list }} {{ words | map('upper') | join }} {{ messages | map(attribute='name', default='-') | list }} {{ nums | map('string') | list }}", {}),
    ("select_reject", "{{ nums | select('odd') | list }} {{ nums | reject('odd') | list }} {{ [0, 1, '', 'a', none] | select | list }} {{ nums | select('gt', 1) | list }} {{ nums | select('equalto', 1) | list }}", {}),
    ("selectattr", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | join(',') }} {{ messages | selectattr('tool_calls') | list | length }} {{ messages | selectattr('tool_calls', 'defined') | map(attribute='role') | first }}", {}),
    ("string_int_float", "{{ 5 | string }} {{ nil | string }} {{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(9) }} {{ 3.9 | int }} {{ '0x1f' | int(0, 16) }} {{ '2.5' | float }} {{ 'x' | float }} {{ 3 | float }} {{ true | int }}", {}),
    ("list_filter", "{{ 'abc' | list }} {{ d | list }} {{ (1, 2) | list }}", {}),
    ("indent_filter", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}", {}),
    ("unique_reverse_sort", "{{ nums | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ nums | reverse | list }} {{ 'abc' | reverse }} {{ nums | sort }} {{ words | sort }} {{ words | sort(case_sensitive=true) }} {{ nums | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='role') | join(',') }}", {}),
    ("numeric_filters", "{{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 7 | round }} {{ nums | max }} {{ nums | min }} {{ words | max }} {{ nums | sum }} {{ [1.5, 2] | sum }} {{ messages | sum(attribute='nope', start=0) if false else 0 }}", {}),
    ("batch_wordcount_center", "{{ [1,2,3,4,5] | batch(2) | list }} {{ [1,2,3] | batch(2, 'x') | list }} {{ 'a b  c-d' | wordcount }} [{{ 'ab' | center(6) }}]", {}),
    ("items_filter", "{{ d | items | list }} {{ nope | items | list }}", {}),
    ("dictsort", "{{ d | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value') }} {{ {'b': 1, 'A': 2} | dictsort(reverse=true) }}", {}),
    ("escape_safe", "{{ '<a href=\"x\">&\\'</a>' | e }} {{ '<b>' | safe }}", {}),
    ("truncate", "{{ 'hello world this is long' | truncate(12) }}|{{ 'hello world this is long' | truncate(12, true) }}|{{ 'short' | truncate(10) }}", {}),
    ("percent_format", "[{{ '%5s|%-5s|%.2s|%5.1s' % ('ab', 'cd', 'xyz', 'qrs') }}] [{{ '%+d %05d %x %o %.3f %10.2e' % (5, -42, 255, 8, 3.14159, 12345.678) }}] [{{ '%r' % 'it' }}]", {}),
    ("format_filter", "{{ '%s-%d' | format('a', 3) }} {{ '%05.1f|%x|%%' % (3.14159, 255) }} {{ 'v=%s' % 'x' }}", {}),
    # string methods
    ("str_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}", {}),
    ("str_methods2", "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'hello'.upper() }} {{ 'HeLLo'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'a-b'.replace('-', '+') }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }}", {}),
    ("str_methods3", "{{ ', '.join(words) }} {{ '{} + {} = {x}'.format(1, 2, x=3) }} {{ '42'.isdigit() }} {{ 'ab'.isalpha() }} {{ '  '.isspace() }} {{ '7'.zfill(3) }} {{ 'ab'.ljust(4, '.') }}| {{ 'ab'.rjust(4) }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }}", {}),
    ("qwen3_think_split", "{% set c = '<think>\\nreason\\n</think>\\n\\nanswer' %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}", {}),
    # globals
    ("range_global", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}", {}),
    ("dict_global", "{{ dict(a=1, b=2) }} {{ dict({'x': 1}) }}", {}),
    ("joiner_global", "{% set j = joiner(' | ') %}{% for x in words %}{{ j() }}{{ x }}{% endfor %}", {}),
    ("messages_loop", "{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls is defined %}{% for tc in m.tool_calls %}[{{ tc.function.name }}({% for k, v in tc.function.arguments.items() %}{{ k }}={{ v | tojson }}{% if not loop.last %},{% endif %}{% endfor %})]{% endfor %}{% endif %}\n{% endfor %}", {}),
    # errors Jinja raises (the message text is not compared, only that both fail)
    ("err_unknown_filter", "{{ n | nosuchfilter }}", {}),
    ("err_unknown_test", "{{ n is nosuchtest }}", {}),
    ("err_undefined_attr_of_undefined", "{{ nope.attr }}", {}),
    ("err_undefined_call", "{{ nope() }}", {}),
    ("err_undefined_add", "{{ nope + 1 }}", {}),
    ("err_undefined_index", "{{ nope[0] }}", {}),
    ("err_undefined_compare", "{{ nope < 1 }}", {}),
    ("err_str_plus_int", "{{ 'a' + 1 }}", {}),
    ("err_int_plus_none", "{{ 1 + nil }}", {}),
    ("err_not_callable", "{{ n() }}", {}),
    ("err_iterate_int", "{% for x in n %}{% endfor %}", {}),
    ("err_iterate_none", "{% for x in nil %}{% endfor %}", {}),
    ("err_raise", "{{ raise_exception('custom failure') }}", {}),
    ("err_unclosed_if", "{% if t %}x", {}),
    ("err_unclosed_for", "{% for x in y %}", {}),
    ("err_bad_end", "{% endfor %}", {}),
    ("err_mismatched_end", "{% if t %}{% endfor %}", {}),
    ("err_syntax", "{{ 1 + }}", {}),
    ("err_unclosed_var", "{{ n ", {}),
    ("err_unclosed_string", "{{ 'abc }}", {}),
    ("err_unclosed_comment", "{# abc", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_do_tag", "{% do x %}", {}),
    ("err_append_unsafe", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("err_dict_update_unsafe", "{{ d.update({'z': 1}) }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_mod_zero", "{{ 1 % 0 }}", {}),
    ("err_range_too_big", "{{ range(1000000) | length }}", {}),
    ("err_unpack_count", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("err_items_non_mapping", "{{ nums | items | list }}", {}),
    ("err_tojson_undefined", "{{ nope | tojson }}", {}),
    ("err_set_ns_attr_on_dict", "{% set x = {} %}{% set x.a = 1 %}", {}),
    ("err_compare_str_int", "{{ 'a' < 1 }}", {}),
    ("err_in_string_int", "{{ 1 in 'abc' }}", {}),
    ("err_join_str_method_nonstr", "{{ ','.join(nums) }}", {}),
    ("err_int_of_undefined", "{{ nope | int }}", {}),
    ("err_last_of_undefined", "{{ nope | last }}", {}),
    ("err_break_outside_loop", "{% break %}", {}),
    ("err_slice_step_zero", "{{ nums[::0] }}", {}),
    ("err_macro_too_many_args", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
]


def main():
    env = make_env()
    out = []
    for name, tpl, extra in CASES:
        vars_ = dict(V)
        vars_.update(extra)
        case = {"name": name, "template": tpl, "vars": vars_}
        try:
            case["out"] = env.from_string(tpl).render(**vars_)
        except Exception as e:  # noqa: BLE001 - the type is what the C test needs
            case["error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    json.dump({"generator": "tools/jinja_goldens.py with Jinja2 " + jinja2.__version__, "cases": out}, sys.stdout,
              ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
