/* report/html_assets.S - the HTML report's page template, script and style
 * (report/html/), embedded as NUL-terminated strings: the report is one
 * self-contained file, and the binary needs nothing at run time. */
	.section .rodata
	.global ml_html_page, ml_html_script, ml_html_style
ml_html_page:
	.incbin "report/html/page.html"
	.byte 0
ml_html_script:
	.incbin "report/html/report.js"
	.byte 0
ml_html_style:
	.incbin "report/html/report.css"
	.byte 0
	.section .note.GNU-stack,"",@progbits
