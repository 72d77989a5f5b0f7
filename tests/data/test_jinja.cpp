// The Jinja interpreter, feature by feature; every expected string is what jinja2 3.1 renders in
// transformers' environment (trim_blocks, lstrip_blocks, loopcontrols, its tojson).
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/jinja/template.h"

namespace {

using sf::jinja::Template;
using sf::jinja::Value;

std::string render(const std::string& src,
                   const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  return Template(src, "t").render(Value::from_json(ctx));
}

// The error message of rendering (or parsing) `src`; "" when it renders.
std::string error_of(const std::string& src,
                     const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object()) {
  try {
    render(src, ctx);
  } catch (const sf::Error& e) {
    return e.what();
  }
  return "";
}

const nlohmann::ordered_json kMsgs = {
    {"messages",
     {{{"role", "system"}, {"content", "Be nice."}},
      {{"role", "user"}, {"content", "Hi"}},
      {{"role", "assistant"}, {"content", "<think>\nhmm\n</think>\n\nHello!"}},
      {{"role", "user"}, {"content", "ünï 🎉"}}}}};

}  // namespace

TEST(Jinja, TextAndComments) {
  EXPECT_EQ(render("plain {# gone #}text"), "plain text");
  EXPECT_EQ(render("a {{ '{{' }} b"), "a {{ b");
  EXPECT_EQ(render("x\n"), "x");  // keep_trailing_newline=False
  EXPECT_EQ(render("x\n\n"), "x\n");
}

TEST(Jinja, WhitespaceControlTrimAndLstripBlocks) {
  EXPECT_EQ(render("  {% if true %}\n    yes\n  {% endif %}\n  {{ 1 }}  \n{# c #}\nafter"),
            "    yes\n  1  \nafter");
  EXPECT_EQ(render("a  {%- if true %} b {% endif -%}  \n\n c {#- x -#} d {# y #}\n  e"),
            "a b cd   e");
  EXPECT_EQ(render("{%+ if true %} a {% endif +%}\n{{- ' b ' -}}\n  c"), " a  b c");
  EXPECT_EQ(render("{%- set x = 5 -%}\n{{- x -}}\n"), "5");
}

TEST(Jinja, NumbersPrintAsPython) {
  EXPECT_EQ(render("{{ 3 }}|{{ 2.0 }}|{{ 10/4 }}|{{ 7//2 }}|{{ -7//2 }}|{{ -7 % 3 }}|{{ 7.5 // 2 "
                   "}}|{{ 2**10 }}"),
            "3|2.0|2.5|3|-4|2|3.0|1024");
  EXPECT_EQ(
      render("{{ 1e20 }}|{{ 0.1+0.2 }}|{{ 1/3 }}|{{ 1e-5 }}|{{ [0.5, 1e16, 1e15, -0.0, 100.0] }}"),
      "1e+20|0.30000000000000004|0.3333333333333333|1e-05|[0.5, 1e+16, 1000000000000000.0, -0.0, "
      "100.0]");
  EXPECT_EQ(render("{{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 2 ** 3 ** 2 }} {{ 10 - 2 - 3 }} {{ -x }}",
                   {{"x", 3}}),
            "14 20 64 5 -3");
}

TEST(Jinja, LiteralsAndRepr) {
  EXPECT_EQ(render("{{ none }}|{{ None }}|{{ true }}|{{ False }}|{{ [1,'a',(1,),(1,2)] }}|{{ {'a': "
                   "\"it's\"} }}"),
            "None|None|True|False|[1, 'a', (1,), (1, 2)]|{'a': \"it's\"}");
  EXPECT_EQ(
      render(
          "{{ 'tab\\there' }}|{{ \"\\u00e9\\x41\" }}|{{ 'adj' 'acent' }}|{{ ['x\\ny', '\\\\'] }}"),
      "tab\there|éA|adjacent|['x\\ny', '\\\\']");
}

TEST(Jinja, IfElifElseAndInlineIf) {
  const char* t =
      "{% if x is not none and x > 1 %}big{% elif x == 1 %}one{% else %}other{% endif %}";
  EXPECT_EQ(render(t, {{"x", 3}}), "big");
  EXPECT_EQ(render(t, {{"x", 1}}), "one");
  EXPECT_EQ(render(t, {{"x", nullptr}}), "other");
  EXPECT_EQ(render("{{ 'a' if x > 2 else 'b' }}|{{ 'yes' if e }}|{{ (1 if false)|default('d') }}",
                   {{"x", 3}, {"e", ""}}),
            "a||d");
}

TEST(Jinja, ForLoopVariables) {
  EXPECT_EQ(
      render(
          "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ "
          "loop.revindex0 }}"
          "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }}|{% endfor %}",
          kMsgs),
      "1043TrueFalse4a|2132FalseFalse4b|3221FalseFalse4a|4310FalseTrue4b|");
  EXPECT_EQ(render("{% for i in [1,2,3] %}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}"),
            "2|13|2|");
}

TEST(Jinja, ForFilterElseUnpackAndScope) {
  EXPECT_EQ(render("{% for m in messages if m.role == 'user' %}{{ loop.index }}/{{ loop.length "
                   "}}:{{ m.content }};"
                   "{% else %}none{% endfor %}",
                   kMsgs),
            "1/2:Hi;2/2:ünï 🎉;");
  EXPECT_EQ(render("{% for m in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %}"), "1234");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "b=1;a=2;");
  // A set in the body lasts one iteration and never leaks out of the loop.
  EXPECT_EQ(
      render("{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
      "1231");
  EXPECT_EQ(render("{% for m in [1] %}{% endfor %}[{{ m }}]"), "[]");
}

TEST(Jinja, LoopControls) {
  EXPECT_EQ(render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 "
                   "%}{% break %}"
                   "{% endif %}{{ i }}{% endfor %}"),
            "02");
}

TEST(Jinja, SetNamespaceAndBlockSet) {
  EXPECT_EQ(render("{% set ns = namespace(n=0, found=false) %}{% for m in messages %}{% set ns.n = "
                   "ns.n + 1 %}"
                   "{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% endfor "
                   "%}{{ ns.n }} {{ ns.found }}",
                   kMsgs),
            "4 True");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}"), "12(1, 2)");
  EXPECT_EQ(render("{% set c %}block {{ 1 }}{% endset %}[{{ c }}]"), "[block 1]");
}

TEST(Jinja, MacrosCallAndFilterBlocks) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Z') }}"),
            "Hi Bob! Hi Al? Hi Z!");
  EXPECT_EQ(render("{% macro f(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, k=3) }}"),
            "(2,){'k': 3}");
  EXPECT_EQ(render("{% macro f(a, b=a) %}{{ b }}{% endmacro %}{{ f(5) }}"), "5");
  EXPECT_EQ(render("{% macro m() %}{{ caller() }}!{% endmacro %}{% call m() %}inside{% endcall %}"),
            "inside!");
  EXPECT_EQ(render("{% filter upper %}hello {{ 1 }}{% endfilter %}"), "HELLO 1");
}

TEST(Jinja, AttributesSubscriptsAndSlices) {
  EXPECT_EQ(render("{{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages[1:3]|length "
                   "}} {{ messages.0.role }}",
                   kMsgs),
            "system ünï 🎉 2 system");
  EXPECT_EQ(render("{{ 'abcdef'[::-1] }} {{ 'abcdef'[1:4] }} {{ [1,2,3,4,5][::2] }} {{ "
                   "[1,2,3][-1:0:-1] }} {{ 'héllo'[1] }}"),
            "fedcba bcd [1, 3, 5] [3, 2] é");
  EXPECT_EQ(render("[{{ [1,2,3][5] }}][{{ d.nokey }}][{{ none.x }}]", {{"d", {{"a", 1}}}}),
            "[][][]");
}

TEST(Jinja, DictAndStringMethods) {
  nlohmann::ordered_json d = {{"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(render("{{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'x') }} {{ d.keys()|list }} "
                   "{{ d.values()|list }} "
                   "{{ d.items()|list }}",
                   d),
            "1 None x ['b', 'a'] [1, 2] [('b', 1), ('a', 2)]");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} "
                   "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x','c')) }} {{ "
                   "'aaa'.replace('a','b',2) }}"),
            "['a', 'b', '', 'c'] ['a', 'b', 'c'] ['a', 'b c'] True True bba");
  EXPECT_EQ(render("{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ "
                   "s.upper() }}|"
                   "{{ s.lower() }}|{{ 'hello wORLD'.title() }}|{{ ', '.join(['a','b']) }}",
                   {{"s", "  Hi You \n"}}),
            "Hi You|Hi You \n|  Hi You|hi|  HI YOU \n|  hi you \n|Hello World|a, b");
  EXPECT_EQ(render("{{ m.split('</think>')[-1].lstrip('\\n') }}|{{ "
                   "m.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}",
                   {{"m", "<think>\nhmm\n</think>\n\nHello!"}}),
            "Hello!|hmm");
}

TEST(Jinja, OperatorsAndComparisons) {
  nlohmann::ordered_json c = {{"x", 3}, {"e", ""}, {"d", {{"k", 1}}}};
  EXPECT_EQ(render("{{ (x > 1) and 'A' or 'B' }} {{ not e }} {{ x in [1,3] }} {{ 'b' not in 'abc' "
                   "}} {{ 'k' in d }} "
                   "{{ 1 < x < 5 }} {{ none or 'fb' }} {{ 0 and 1 }} {{ not x == 3 }}",
                   c),
            "A True True False True True fb 0 False");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ nothing }}|{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1] + [2] }}|{{ "
                   "'a' ~ 'b' + 'c' }}"),
            "a1None|ababab|[1, 1]|[1, 2]|abc");
}

TEST(Jinja, Filters) {
  EXPECT_EQ(render("{{ s|trim }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello world-foo'|title }}|{{ "
                   "'hELLO'|capitalize }}|"
                   "{{ s|length }}|{{ s|replace('l', 'L') }}",
                   {{"s", " hello "}}),
            "hello| HELLO | hello |Hello World-Foo|Hello|7| heLLo ");
  EXPECT_EQ(render("{{ messages|map(attribute='role')|join(', ') }}|{{ messages|selectattr('role', "
                   "'equalto', 'user')|list|length }}|"
                   "{{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}|{{ "
                   "[1,0,2]|select|list }}",
                   kMsgs),
            "system, user, assistant, user|2|['system', 'assistant']|[1, 2]");
  EXPECT_EQ(
      render("{{ [3,1,2]|sort }}|{{ ['b','A','c']|sort }}|{{ [3,1,2]|max }}|{{ [1,2,3]|sum }}|{{ "
             "[1,1,2]|unique|list }}|"
             "{{ [1,2]|reverse|list }}|{{ 'abc'|reverse }}|{{ 'abc'|first }}|{{ [1,2]|last }}"),
      "[1, 2, 3]|['A', 'b', 'c']|3|6|[1, 2]|[2, 1]|cba|a|2");
  EXPECT_EQ(render("{{ '5'|int + 1 }}|{{ 'x'|int }}|{{ '2.5'|float }}|{{ 3|string ~ 'a' }}|{{ "
                   "3.7|int }}|{{ {'b': 1}|items|list }}|"
                   "{{ nothing|default('dv') }}|{{ ''|d('dv', true) }}|{{ -1|abs }}"),
            "6|0|2.5|3a|3|[('b', 1)]|dv|dv|1");
  EXPECT_EQ(render("{{ '<a href=\"x\">&\\'' | e }}|{{ '<b>'|safe }}|{{ "
                   "'line1\nline2\n\nline3'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&#39;|<b>|line1\n  line2\n\n  line3|  a\n  b");
}

TEST(Jinja, TojsonMatchesTransformers) {
  nlohmann::ordered_json c = {{"d", {{"b", 1}, {"a", {1, 2.5, nullptr, true, "é\n\"q\""}}}}};
  EXPECT_EQ(render("{{ d|tojson }}", c),
            "{\"b\": 1, \"a\": [1, 2.5, null, true, \"é\\n\\\"q\\\"\"]}");
  EXPECT_EQ(render("{{ d|tojson(indent=2) }}", c),
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true,\n    "
            "\"é\\n\\\"q\\\"\"\n  ]\n}");
  EXPECT_EQ(render("{{ d|tojson(sort_keys=true) }}", c),
            "{\"a\": [1, 2.5, null, true, \"é\\n\\\"q\\\"\"], \"b\": 1}");
  EXPECT_EQ(render("{{ d|tojson(ensure_ascii=true) }}", c),
            "{\"b\": 1, \"a\": [1, 2.5, null, true, \"\\u00e9\\n\\\"q\\\"\"]}");
  EXPECT_EQ(render("{{ d|tojson(separators=(',', ':')) }}", c),
            "{\"b\":1,\"a\":[1,2.5,null,true,\"é\\n\\\"q\\\"\"]}");
  EXPECT_EQ(render("{{ []|tojson(indent=2) }}{{ {}|tojson }}{{ 1.0|tojson }}{{ (1,2)|tojson }}{{ "
                   "'🎉\\x01'|tojson(ensure_ascii=true) }}"),
            "[]{}1.0[1, 2]\"\\ud83c\\udf89\\u0001\"");
}

TEST(Jinja, TestsAndUndefined) {
  EXPECT_EQ(render("{{ nothing }}|{{ nothing is defined }}|{{ d.nokey is defined }}|{{ none is "
                   "none }}|{{ d is mapping }}|"
                   "{{ 'x' is string }}|{{ [1] is sequence }}|{{ 3 is number }}|{{ true is boolean "
                   "}}|{{ false is false }}|"
                   "{{ 3 is odd }}|{{ 4 is divisibleby 2 }}|{{ 3 is equalto 3 }}|{{ 3 is in [3] "
                   "}}|{{ 'ab' is lower }}",
                   {{"d", {{"a", 1}}}}),
            "|False|False|True|True|True|True|True|True|True|True|True|True|True|True");
  EXPECT_EQ(
      render("{{ nothing == none }} {{ nothing != 1 }} {{ nothing|length }} [{{ nothing|trim }}] "
             "{% for a in nothing %}x{% endfor %}{{ 'a' in nothing }} {{ nothing is iterable }}"),
      "False True 0 [] False True");
}

TEST(Jinja, GlobalsRangeDictNamespace) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ dict(a=1, b=2) }} {{ "
                   "namespace(a=1).a }}"),
            "[0, 1, 2] [1, 4, 7] {'a': 1, 'b': 2} 1");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(Jinja, RaiseExceptionMessageIsVerbatim) {
  try {
    render("ok{{ raise_exception('Roles must alternate: user/assistant!') }}");
    FAIL() << "expected RaisedError";
  } catch (const sf::jinja::RaisedError& e) {
    EXPECT_STREQ(e.what(), "Roles must alternate: user/assistant!");
  }
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  auto has = [](const std::string& err, const std::string& part) {
    return err.find(part) != std::string::npos;
  };
  std::string e = error_of("line1\n{{ x|nosuchfilter }}");
  EXPECT_TRUE(has(e, "nosuchfilter") && has(e, "line 2")) << e;
  e = error_of("{% if x %}\n\n{% for y in z %}");
  EXPECT_TRUE(has(e, "unterminated 'for'") && has(e, "line 3")) << e;
  e = error_of("\n{{ x is nosuchtest }}");
  EXPECT_TRUE(has(e, "nosuchtest") && has(e, "line 2")) << e;
  e = error_of("{% include 'other.jinja' %}");
  EXPECT_TRUE(has(e, "unsupported construct") && has(e, "include")) << e;
  e = error_of("{% foo %}");
  EXPECT_TRUE(has(e, "unknown tag 'foo'")) << e;
  e = error_of("{% endfor %}");
  EXPECT_TRUE(has(e, "endfor")) << e;
  e = error_of("{{ 'abc' }");
  EXPECT_TRUE(has(e, "unterminated")) << e;
  e = error_of("{% if %}{% endif %}");
  EXPECT_TRUE(has(e, "expected an expression")) << e;
  e = error_of("{% break %}");
  EXPECT_TRUE(has(e, "outside of a for loop")) << e;
  e = error_of("{{ '%s' % 'x' }}");
  EXPECT_TRUE(has(e, "unsupported construct")) << e;
  e = error_of("{% for x in y recursive %}{% endfor %}");
  EXPECT_TRUE(has(e, "unsupported construct: recursive")) << e;
  // Runtime errors where jinja2 errors (its default Undefined fails on use).
  e = error_of("\n\n{{ nothing.attr }}");
  EXPECT_TRUE(has(e, "'nothing' is undefined") && has(e, "line 3")) << e;
  EXPECT_NE(error_of("{{ nothing['k'] }}"), "");
  EXPECT_NE(error_of("{{ nothing + 1 }}"), "");
  EXPECT_NE(error_of("{{ 1 + 'a' }}"), "");
  EXPECT_NE(error_of("{{ 'a' + 1 }}"), "");
  EXPECT_NE(error_of("{{ 3 > 'a' }}"), "");
  EXPECT_NE(error_of("{{ 5 // 0 }}"), "");
  EXPECT_NE(error_of("{{ [1,2].append(3) }}"), "");  // the sandbox refuses mutation
  EXPECT_NE(error_of("{% set x.y = 1 %}"), "");
  EXPECT_NE(error_of("{{ nothing|tojson }}"), "");
  EXPECT_TRUE(
      has(error_of("{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}"), "takes not more than 1"));
  EXPECT_TRUE(has(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), "recursion"));
  // An unknown filter inside an if fails only when reached, as in jinja2 >= 3.
  EXPECT_EQ(render("{% if false %}{{ x|nosuchfilter }}{% endif %}ok"), "ok");
  EXPECT_TRUE(has(error_of("{% if true %}{{ x|nosuchfilter }}{% endif %}"), "nosuchfilter"));
}
